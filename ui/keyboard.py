"""Keyboard shortcuts: a page-head script that maps keys to the review buttons' element ids.

Keys act on the visible tab (review: `act-*`, adjudication: `adj-*`). While a text field has focus, keys type
text; Escape leaves the field. In the class picker Enter takes the highlighted class while something is typed, and
saves the picked classes once the search text is empty. A decision key is ignored until the previous decision's
answer has replaced the card, so a double press never labels the next image.

The listener runs in the capture phase, before the dropdown's own handler: that handler empties the search text
when it takes a class, so a listener that ran after it could not tell "take this class" from "save".
"""

import json

KEYS = {
    "1": "original",
    "2": "suggestion",
    "3": "both",
    "z": "none_fit",
    "x": "unclear",
    "enter": "labels",
    "k": "skip",
    "u": "undo",
    "f": "full",
    "n": "next",
}
FLAG_KEYS = {"d": 0, "m": 1, "c": 2, "i": 3}  # positions in ui.views.FLAG_LABELS

KEYBOARD_JS = """
<script>
(() => {
  const KEYS = __KEYS__;
  const FLAGS = __FLAGS__;
  const DECISIONS = new Set(["original", "suggestion", "both", "none_fit", "unclear", "labels", "skip"]);
  let pendingKey = null;
  // checkboxes and radios are inputs too, but a shortcut must still work after one was clicked
  const TEXT_TYPES = new Set(["text", "search", "email", "number", "password", "url", "tel"]);
  const visible = (el) => el && el.offsetParent !== null;
  const prefix = () => (visible(document.getElementById("adj-original")) ? "adj" : "act");
  const cardKey = () => {
    const box = document.querySelector(`#${prefix() === "adj" ? "adjcard" : "card"}-key textarea`);
    return box ? box.value : null;
  };
  const click = (name) => {
    const id = name === "full" ? `${prefix() === "adj" ? "adjcard" : "card"}-full` : `${prefix()}-${name}`;
    const el = document.getElementById(id);
    if (!el) return false;
    (el.tagName === "BUTTON" ? el : el.querySelector("button") || el).click();
    return true;
  };
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    const key = ev.key.toLowerCase();
    const typing = t && (t.tagName === "TEXTAREA" || t.isContentEditable || TEXT_TYPES.has(t.type));
    if (typing) {
      if (key === "escape") { t.blur(); ev.preventDefault(); }
      else if (key === "enter" && (ev.ctrlKey || ev.metaKey || t.closest(`#${prefix()}-picker`) && !t.value)) {
        // stop here, or the dropdown would also add its highlighted class to the picked ones
        ev.preventDefault(); ev.stopPropagation(); t.blur(); click("labels");
      }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (key === "/") {
      const input = document.querySelector(`#${prefix()}-picker input`);
      if (input) { input.focus(); ev.preventDefault(); }
      return;
    }
    if (key in FLAGS) {
      const boxes = document.querySelectorAll(`#${prefix()}-flags input[type=checkbox]`);
      if (boxes[FLAGS[key]]) { boxes[FLAGS[key]].click(); ev.preventDefault(); }
      return;
    }
    const action = KEYS[key];
    if (!action) return;
    if (DECISIONS.has(action)) {
      const current = cardKey();
      if (pendingKey !== null && pendingKey === current) { ev.preventDefault(); return; }
      pendingKey = current;
      setTimeout(() => { if (pendingKey === current) pendingKey = null; }, 2000);
    }
    if (click(action)) ev.preventDefault();
  }, true);
})();
</script>
""".replace("__KEYS__", json.dumps(KEYS)).replace("__FLAGS__", json.dumps(FLAG_KEYS))
