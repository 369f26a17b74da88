// Choosing a status reloads the claims with it in the URL; empty fields stay out of the URL
// (an empty where= is refused, an empty status= means any).
(function () {
  "use strict";
  var select = document.getElementById("claims-status");
  var form = document.getElementById("claims-form");
  if (!select || !form) return;
  function send() {
    Array.prototype.forEach.call(form.elements, function (field) {
      if (field.name && !field.value) field.disabled = true;
    });
    form.submit();
  }
  form.addEventListener("submit", function (event) { event.preventDefault(); send(); });
  select.addEventListener("change", send);
})();
