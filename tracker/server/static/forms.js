// The pages' query forms: empty fields stay out of the URL (an empty where= is refused, an
// empty model= would select no model), and a select marked data-submit reloads the page
// with its choice in the URL at once.
(function () {
  "use strict";
  function send(form) {
    Array.prototype.forEach.call(form.elements, function (field) {
      if (field.name && !field.value) field.disabled = true;
    });
    form.submit();
  }
  Array.prototype.forEach.call(document.querySelectorAll("form[data-drop-empty]"), function (form) {
    form.addEventListener("submit", function (event) { event.preventDefault(); send(form); });
    Array.prototype.forEach.call(form.querySelectorAll("select[data-submit]"), function (select) {
      select.addEventListener("change", function () { send(form); });
    });
  });
})();
