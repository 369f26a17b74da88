// /docs: Swagger UI draws the API from /openapi.json, as FastAPI's own page would, but from
// this file rather than inline script (the Content-Security-Policy allows only files).
(function () {
  "use strict";
  SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    showCommonExtensions: true,
  });
})();
