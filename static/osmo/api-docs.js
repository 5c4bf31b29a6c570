"use strict";
// Starts Swagger UI or Redoc (drf-spectacular-sidecar's files, from our origin) on templates/api/*.html:
// a file rather than inline script, which the content security policy refuses.
(function () {
  const swagger = document.getElementById("swagger-ui");
  if (swagger && window.SwaggerUIBundle) {
    const csrfToken = swagger.dataset.csrfToken;
    window.ui = window.SwaggerUIBundle({
      url: swagger.dataset.schemaUrl,
      domNode: swagger,
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
      deepLinking: true,
      // Writes go through the session, so they carry the CSRF token as the site's forms do.
      requestInterceptor: (request) => {
        if (!["GET", "HEAD", "OPTIONS", undefined].includes(request.method)) {
          request.headers["X-CSRFToken"] = csrfToken;
        }
        return request;
      },
    });
  }
  const redoc = document.getElementById("redoc");
  if (redoc && window.Redoc) {
    window.Redoc.init(redoc.dataset.schemaUrl, {disableSearch: true}, redoc);
  }
})();
