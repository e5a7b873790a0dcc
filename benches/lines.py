"""Appends log lines like the deckies write to a file, for the benches:
    python3 benches/lines.py PATH START COUNT [in-order]
A mix of deckies, services and addresses, each line with its sequence number. With `in-order` the
timestamps rise a millisecond a line, as deckies write them; without, they wrap every hour (the old
generator's lines, the harder case for the time indexes)."""
import datetime
import sys

path, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
in_order = len(sys.argv) > 4 and sys.argv[4] == "in-order"
services = ["ssh", "http", "smtp", "ftp", "telnet"]
base = datetime.datetime(2026, 5, 2)
with open(path, "a") as f:
    for i in range(start, start + count):
        if in_order:
            stamp = (base + datetime.timedelta(milliseconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%f")
        else:
            stamp = f"2026-05-02T06:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000000:06d}"
        f.write(f'<134>1 {stamp}+00:00 decky-{i % 10:02d} '
                f'{services[i % 5]} - auth_attempt [relay@55555 src_ip="198.51.100.{i % 250}" username="root" seq="{i}"] attempt {i}\n')
