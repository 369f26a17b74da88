"""Credentials written into a URL, masked wherever the URL is shown or kept.

``s3://KEY:SECRET@bucket/...`` and ``https://user:pass@host/...`` keep their scheme and host,
not what stands before the ``@``; a query's values under names that say secret (``?token=``,
``?secret=``, ``X-Amz-Signature=``) become ``***``. A user name alone (``postgresql://me@host``)
is no secret and stays.
"""

from __future__ import annotations

import re

MASK = "***"
# scheme://user:password@ -> scheme://***@ (the userinfo holds a colon: it carries a secret)
USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s:?#]*:[^@\s]*@")
SECRET_NAME = r"[^=&\s?#]*(?:secret|token|key|password|passwd|credential|signature)[^=&\s?#]*"
QUERY_SECRET = re.compile(rf"(?P<name>[?&;]{SECRET_NAME}=)[^&\s#:]*", re.IGNORECASE)


def masked(text: str) -> str:
    """``text`` with every credential a URL in it carries replaced by ``***``."""
    if "://" not in text and "=" not in text:
        return text
    text = USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    return QUERY_SECRET.sub(rf"\g<name>{MASK}", text)
