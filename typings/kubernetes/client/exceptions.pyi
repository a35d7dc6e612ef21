class OpenApiException(Exception): ...

class ApiException(OpenApiException):
    status: int | None
    reason: str | None
    body: str | bytes | None
