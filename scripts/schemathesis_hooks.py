"""Schemathesis hooks for scripts/schemathesis: strategies for the formats svc's OpenAPI document
defines beyond JSON Schema's, so that what the fuzzer calls valid is what the server accepts."""

import schemathesis
from hypothesis import strategies as st

# Passwords: 12 characters at least (minLength) and at most 72 bytes in UTF-8, which JSON Schema's
# maxLength (characters) cannot say.
schemathesis.openapi.format(
    "utf8-bytes-max-72",
    st.text(min_size=12, max_size=72).filter(lambda text: len(text.encode("utf-8", "surrogatepass")) <= 72),
)


# Topology generation: deckies_per_lan_min above deckies_per_lan_max is refused (400, as DECNET
# does), a rule between two fields JSON Schema cannot state; generated bodies keep min <= max.
@schemathesis.hook
def filter_body(ctx, body):
    if not isinstance(body, dict):
        return True
    low, high = body.get("deckies_per_lan_min", 1), body.get("deckies_per_lan_max", 3)
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and not isinstance(low, bool):
        return low <= high
    return True
