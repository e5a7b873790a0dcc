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
