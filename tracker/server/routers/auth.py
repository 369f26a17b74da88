"""``/login?token=``: trade the token for a cookie once, so a browser needs no header."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse

from tracker.server.deps import ServedDep
from tracker.server.security import LOGIN_PATH, TOKEN_COOKIE, token_matches

router = APIRouter(tags=["auth"])


@router.get(LOGIN_PATH, include_in_schema=False)
def login(
    request: Request, served: ServedDep, token: Annotated[str, Query()] = ""
) -> RedirectResponse:
    response = RedirectResponse("/", status_code=303)
    if served.token is None:
        return response
    if not token_matches(token, served.token):
        raise HTTPException(status_code=401, detail="wrong token")
    response.set_cookie(
        TOKEN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response
