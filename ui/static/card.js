// The review / adjudication card, drawn in the page. Run by Gradio as the `js_on_load` of a gr.HTML component
// (ui/card_component.py), which provides `element` (the component's root), `props` (props.mode is "review" or
// "adjudicate") and `server` (the component's server functions, one HTTP request each: ui/card_api.py).
//
// Untrusted text (class names, model answers, notes, paths, user names) only ever goes into the page as text
// (textContent), never as markup. Every action is one request that answers with the next card; the image of the
// card likely to come next is fetched ahead, so the swap shows at once.
(() => {
  const MODE = props.mode === "adjudicate" ? "adjudicate" : "review";
  const ADJ = MODE === "adjudicate";
  const root = element.querySelector(".rg");
  const $ = (sel) => root.querySelector(sel);
  const $$ = (sel) => Array.from(root.querySelectorAll(sel));
  const QUICK = { "1": "original", "2": "suggestion", "3": "both", z: "none_fit", x: "unclear" };
  const SHORTCUTS = [
    ["1 / 2 / 3", "original is right / suggestion is right / both"],
    ["/ then type", "search the classes; ↑ ↓ choose, Enter adds the class shown under the search field"],
    ["Enter", "save the picked classes (outside the search field, or with it empty)"],
    ["Z / X", "no class fits / unclear"],
    ["K / U / N", ADJ ? "next disputed image / undo / next disputed image" : "skip / undo your last decision / next card"],
    ["F", "zoom: full resolution, wheel or + − to zoom, drag or arrows to pan, 0 fits"],
    ["H", "history of this image"],
    ["G", "the labeling guidelines"],
    ["O", "comment on this image: Enter saves, Esc cancels"],
    ["R", "my recent decisions: click one to open its image and change the decision"],
    ["Esc", "leave a text field, close a view"],
  ];
  if (ADJ) SHORTCUTS.splice(1, 0, ["Shift+1 … 9", "take annotator 1 … 9's answer as the verdict"]);

  const state = {
    booted: false, card: null, key: "", busy: false, picked: new Map(), flags: new Set(),
    filter: { status: "open", class_index: null, category: null }, pendingFilterClass: null,
    list: [], answers: [], prefetched: [], lastUrl: "",
  };
  // The flags come with the boot payload (relabel/decisions/card_flags.py): name, label and the key that toggles each.
  const flags = () => (state.boot && state.boot.flags) || [];
  const flagOfKey = (key) => flags().find((f) => f.key === key);
  const shortcuts = () => {
    const rows = [...SHORTCUTS];
    const keys = flags().map((f) => f.key.toUpperCase()).join(" ");
    rows.splice(rows.findIndex(([k]) => k === "Z / X") + 1, 0, [keys, `flags: ${flags().map((f) => f.label).join(", ")}`]);
    return rows;
  };
  root.dataset.mode = MODE;
  root.dataset.key = "";
  const img = $(".rg-img");
  img.id = `${MODE}-img`;

  // -- small DOM helpers: text only ------------------------------------------------------------------------------
  const make = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const clear = (node) => { while (node.firstChild) node.removeChild(node.firstChild); return node; };
  const setText = (sel, text) => { $(sel).textContent = text || ""; };
  const visible = () => root.offsetParent !== null;

  // -- talking to the server -------------------------------------------------------------------------------------
  // Gradio's client answers nothing (undefined) when a request is refused or fails, so an empty answer is followed
  // by one look at the session: when it has ended (a sign-out, an expiry, a disabled user) the card says so and
  // offers to sign in again, instead of failing on every key.
  const SIGNED_OUT = "signed out: sign in again";
  async function call(name, data) {
    let reply;
    try {
      reply = await server[name](data || {});
    } catch (err) {
      reply = null;
    }
    if (reply && typeof reply === "object") return reply;
    const session = await sessionState();
    if (session === "out") return { error: SIGNED_OUT, signedOut: true };
    if (session === "unreachable") {
      return { error: "the studio did not answer: check the connection, or wait for it to restart and press the key again" };
    }
    // the session holds: the answer was lost on the way (or the studio failed). The card keeps its token, so
    // pressing the key again resends the same decision, which the studio never stores twice.
    return { error: "no answer from the studio: press the key again (a decision is never stored twice)" };
  }
  async function sessionState() {
    try {
      const res = await fetch(new URL("gradio_api/token", location.href), { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) return "unreachable";
      const body = await res.json();
      return body && body.user ? "in" : "out";
    } catch (err) {
      return "unreachable";
    }
  }

  let toastTimer = null;
  function toast(text, isError, signedOut) {
    const box = $(".rg-toast");
    box.textContent = text || "";
    box.classList.toggle("rg-error", !!isError);
    const signIn = $(".rg-signin");
    signIn.hidden = !signedOut;
    if (signedOut) signIn.href = location.pathname + location.search;  // the sign-in page, then this image again
    clearTimeout(toastTimer);
    if (text && !isError) toastTimer = setTimeout(() => { box.textContent = ""; }, 6000);
  }

  function apply(reply, push) {
    if (reply.list) renderList(reply.list);
    if ("today" in reply) renderToday(reply.today);
    if ("card" in reply) {
      if (reply.card) renderCard(reply.card, push);
      else renderEmpty(reply.message || "nothing to show");
    }
    // an answer without an error clears the last one; a message already shown in place of the card is not repeated
    const inStage = "card" in reply && !reply.card;
    if (reply.error) toast(reply.error, true, !!reply.signedOut);
    else toast(inStage ? "" : reply.message, false);
  }

  // -- the card --------------------------------------------------------------------------------------------------
  function renderEmpty(message) {
    state.card = null; state.key = ""; root.dataset.key = ""; root.dataset.imageId = "";
    img.removeAttribute("src"); img.hidden = true; state.lastUrl = "";
    const none = $(".rg-noimg"); none.hidden = false; none.textContent = message;
    for (const sel of [".rg-caption", ".rg-original-name", ".rg-original-more", ".rg-suggestion-name",
      ".rg-suggestion-more", ".rg-priors-items", ".rg-progress"]) setText(sel, "");
    clear($(".rg-topk-items")); clear($(".rg-others-items")); renderComments([]);
    renderReason(null);
    $$(".rg-ref").forEach((r) => { r.hidden = true; r.removeAttribute("src"); });
    resetForm(null);
  }

  function renderCard(card, push) {
    state.card = card; state.key = card.key;
    root.dataset.key = card.key; root.dataset.imageId = String(card.image_id);
    const none = $(".rg-noimg");
    if (card.url) {
      none.hidden = true; img.hidden = false;
      if (card.url !== state.lastUrl) {
        img.classList.add("rg-loading");
        img.src = card.url; state.lastUrl = card.url;
      }
    } else {
      img.hidden = true; img.removeAttribute("src"); state.lastUrl = "";
      none.hidden = false; none.textContent = card.image_error || "this image cannot be shown";
    }
    setText(".rg-caption", [card.dataset, card.path, card.size, card.notes].filter(Boolean).join(" · "));
    setText(".rg-progress", card.status);
    renderReason(card);
    renderOriginal(card); renderSuggestion(card); renderTopk(card); renderPriors(card); renderOthers(card);
    renderComments(card.comments || []);
    resetForm(card.own);
    updateAddress(card.image_id, push);
    prefetch(card.prefetch || []);
    if (ADJ) markCurrentInList();
  }

  function renderReason(card) {
    const box = $(".rg-reason");
    box.hidden = !(card && card.reason);
    box.textContent = card && card.reason ? `Next because: ${card.reason}` : "";
  }

  function showRef(block, example) {
    const ref = $(`${block} .rg-ref`);
    if (example && example.url) {
      ref.hidden = false; ref.src = example.url; ref.title = `reference photo: ${example.label}`;
    } else { ref.hidden = true; ref.removeAttribute("src"); }
  }

  function renderOriginal(card) {
    const names = card.original.map((c) => c.label);
    setText(".rg-original-name", names.length ? names.join("; ") : "no original label");
    const more = [];
    for (const c of card.original) {
      if (c.synonyms && c.synonyms.length) more.push(`synonyms: ${c.synonyms.join(", ")}`);
      if (c.gloss) more.push(c.gloss);
    }
    setText(".rg-original-more", more.join(" · "));
    showRef(".rg-original", card.examples && card.examples.original);
  }

  function renderSuggestion(card) {
    const s = card.suggestion;
    let head = "suggestion", name = "", more = "";
    if (s && !s.ok) {
      head = `suggestion · ${s.model} · ${s.protocol}`;
      name = "the model failed on this image"; more = s.error || "";
    } else if (s) {
      head = `suggestion · ${s.model} · ${s.protocol}`;
      name = s.class ? s.class.label : "no class";
      more = [s.answer ? `answer: ${s.answer}` : "", ...(s.notes || [])].filter(Boolean).join(" · ");
    } else if (card.suggested) {
      head = "suggestion · classifier top-1 (no MLLM run)";
      name = card.suggested.label;
    } else {
      name = "no suggestion for this image";
    }
    setText(".rg-suggestion-head", head); setText(".rg-suggestion-name", name); setText(".rg-suggestion-more", more);
    showRef(".rg-suggestion", card.examples && card.examples.suggested);
  }

  function renderTopk(card) {
    const list = clear($(".rg-topk-items"));
    peek.hidden = true;
    const c = card.classifier;
    setText(".rg-topk-head", c ? `classifier top-5 · ${c.model}` : "classifier top-5");
    if (!c) { list.appendChild(make("li", "rg-dim", "no classifier run")); return; }
    if (c.error) { list.appendChild(make("li", "rg-dim", c.error)); return; }
    const originals = new Set(card.original.map((o) => o.index));
    for (const t of c.top) {
      const li = make("li", originals.has(t.index) ? "rg-is-original" : "");
      const fill = make("span", "rg-bar-fill");
      fill.style.width = `${Math.max(0, Math.min(1, t.score)) * 100}%`;
      li.append(fill, thumbImg("rg-topk-ref", t), make("span", "", t.label), make("span", "rg-score", t.score.toFixed(2)));
      li.title = "click to add this class to the picked ones";
      li.addEventListener("click", () => addPicked(t));
      list.appendChild(li);
    }
    fillThumbs(list);
  }

  function renderPriors(card) {
    const lines = card.priors.map((p) => {
      const classes = p.classes.length ? p.classes.map((c) => c.name).join("; ") : "(excluded / none)";
      return `${p.source}: ${classes}${p.detail ? ` (${p.detail})` : ""}`;
    });
    setText(".rg-priors-items", lines.length ? lines.join(" · ") : "none imported");
  }

  function renderOthers(card) {
    const list = clear($(".rg-others-items"));
    state.answers = card.others.filter((o) => !o.lead);
    setText(".rg-others-head", ADJ ? "annotators' answers (Shift+N takes answer N)" : "other decisions (shown after you decide)");
    if (!card.others.length) {
      list.appendChild(make("li", "rg-dim", ADJ ? "no answers yet" : (card.own ? "no one else yet" : "hidden until you decide")));
      return;
    }
    let n = 0;
    for (const o of card.others) {
      const li = make("li");
      if (ADJ && !o.lead) {
        n += 1;
        const take = make("button", "rg-btn rg-small rg-take", `⇧${n} take`);
        take.type = "button";
        take.dataset.answer = String(o.id);
        take.addEventListener("click", () => takeAnswer(o.id));
        li.appendChild(take);
      }
      li.append(make("span", "rg-who", `${o.lead ? "lead " : ""}${o.who}:`), make("span", "", o.what));
      if (o.note) { li.appendChild(make("span", "rg-dim rg-others-note", `— ${o.note}`)); li.title = o.note; }  // one line: the whole note on hover
      list.appendChild(li);
    }
  }

  // -- the decision form -----------------------------------------------------------------------------------------
  function resetForm(own) {
    state.picked = new Map(); state.flags = new Set();
    $(".rg-note").value = "";
    $(".rg-query").value = ""; hideResults($(".rg-picker .rg-results"));
    const ownBox = $(".rg-own");
    if (own) {
      for (const c of own.classes) state.picked.set(c.index, c);
      for (const f of own.flags) state.flags.add(f);
      $(".rg-note").value = own.note || "";
      ownBox.hidden = false;
      ownBox.textContent = own.undone
        ? `You undid this answer (${own.when}): ${own.what}. It is pre-filled; decide again.`
        : `Your answer (${own.when}): ${own.what}. Deciding again replaces it.`;
    } else { ownBox.hidden = true; ownBox.textContent = ""; }
    renderChips(); renderFlags(); preview();
  }

  function renderChips() {
    const box = clear($(".rg-chips"));
    for (const c of state.picked.values()) {
      const chip = make("span", "rg-chip");
      chip.dataset.index = String(c.index);
      const drop = make("button", "", "×");
      drop.type = "button"; drop.title = "remove";
      drop.addEventListener("click", () => { state.picked.delete(c.index); renderChips(); preview(); });
      chip.append(make("span", "", c.label), drop);
      box.appendChild(chip);
    }
  }

  function renderFlags() {
    const box = clear($(".rg-flags"));
    for (const f of flags()) {
      const b = make("button", `rg-btn rg-small rg-flag${state.flags.has(f.name) ? " rg-on" : ""}`);
      b.type = "button"; b.dataset.flag = f.name;
      b.setAttribute("aria-pressed", state.flags.has(f.name) ? "true" : "false");
      b.append(make("kbd", "", f.key.toUpperCase()), document.createTextNode(f.label));
      b.addEventListener("click", () => toggleFlag(f.name));
      box.appendChild(b);
    }
  }

  function toggleFlag(name) {
    if (state.flags.has(name)) state.flags.delete(name); else state.flags.add(name);
    renderFlags();
  }

  function addPicked(c) {
    state.picked.set(c.index, { index: c.index, name: c.name, label: c.label });
    renderChips(); preview();
  }

  // -- class search ----------------------------------------------------------------------------------------------
  // Each search field remembers the query its results answer; Enter waits for the answer to what is typed now,
  // so it never adds a class found for an earlier, shorter query.
  function searcher(input, list, onPick, onPreview) {
    const s = { seq: 0, results: [], active: 0, answered: "", pending: null };
    async function run(query) {
      const seq = ++s.seq;
      if (!query.trim()) { s.results = []; s.answered = query; hideResults(list); onPreview(s); return; }
      const reply = await call("search", { query, exclude: state.card ? state.card.image_id : null });
      if (seq !== s.seq) return;
      s.results = reply.matches || []; s.active = 0; s.answered = query;
      if (reply.error) toast(reply.error, true, !!reply.signedOut);
      draw(); onPreview(s);
    }
    function draw() {
      clear(list);
      s.results.forEach((m, i) => {
        const li = make("li", i === s.active ? "rg-active" : "");
        const what = make("span", "rg-what", m.label);
        if (m.gloss) what.append(make("span", "rg-gloss", m.gloss));
        if (m.twins && m.twins.length) {
          const twin = make("span", "rg-dup", m.twin_note);
          twin.title = "these classes name one kind of object: check which fits, or add both";
          what.append(twin);
        }
        li.append(thumbImg("rg-thumb", m), what, make("span", "rg-how", m.how === "exact" ? "" : m.how));
        li.addEventListener("mousedown", (ev) => { ev.preventDefault(); s.active = i; pick(); });
        list.appendChild(li);
      });
      list.hidden = s.results.length === 0;
      fillThumbs(list);
    }
    async function pick() {
      if (s.answered !== input.value) { s.pending = run(input.value); await s.pending; }
      const m = s.results[s.active];
      if (!m) { if (input.value.trim()) toast(`no class matches "${input.value}"`, true); return; }
      onPick(m);
      input.value = ""; s.results = []; s.answered = ""; hideResults(list); onPreview(s);
    }
    input.addEventListener("input", () => { s.pending = run(input.value); onPreview(s); });
    input.addEventListener("blur", () => setTimeout(() => hideResults(list), 150));
    input.addEventListener("focus", () => { if (s.results.length) list.hidden = false; });
    s.move = (step) => {
      if (!s.results.length) return;
      s.active = (s.active + step + s.results.length) % s.results.length; draw(); onPreview(s);
    };
    s.pick = pick;
    return s;
  }
  const hideResults = (list) => { list.hidden = true; };

  function preview(s) {
    const box = clear($(".rg-preview"));
    const query = $(".rg-query").value;
    const search = s || classSearch;
    if (query.trim()) {
      const m = search && search.answered === query ? search.results[search.active] : null;
      if (m) {
        box.append("Enter adds ", make("b", "", m.label), m.how === "exact" ? "" : ` (${m.how} match for "${query}")`);
        if (m.twins && m.twins.length) box.append(make("span", "rg-dup", ` ≈ ${m.twins.join(", ")}`));
      } else if (search && search.answered === query) {
        box.append(`no class matches "${query}"`);
      } else { box.append("searching…"); }
    } else if (state.picked.size) {
      box.append("Enter saves ", make("b", "", [...state.picked.values()].map((c) => c.name).join("; ")));
    } else {
      box.append("/ to search classes · click a top-5 row to pick it");
    }
  }

  const classSearch = searcher($(".rg-query"), $(".rg-picker .rg-results"), addPicked, preview);

  $(".rg-query").addEventListener("keydown", (ev) => {
    const input = ev.target;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault(); classSearch.move(ev.key === "ArrowDown" ? 1 : -1);
    } else if (ev.key === "Enter") {
      ev.preventDefault(); ev.stopPropagation();
      if (input.value.trim()) classSearch.pick();
      else { input.blur(); act("labels"); }
    } else if (ev.key === "Escape") {
      ev.preventDefault(); input.value = ""; hideResults($(".rg-picker .rg-results")); input.blur(); preview();
    } else if (ev.key === "Backspace" && !input.value && state.picked.size) {
      const last = [...state.picked.keys()].pop(); state.picked.delete(last); renderChips(); preview();
    }
  });

  // -- actions ---------------------------------------------------------------------------------------------------
  function formData(extra) {
    return Object.assign({
      key: state.key, classes: [...state.picked.keys()], flags: [...state.flags],
      note: $(".rg-note").value, filter: state.filter,
    }, extra || {});
  }

  async function send(name, data) {
    if (state.busy) return;
    state.busy = true; root.classList.add("rg-busy");
    try {
      const reply = await call(name, data);
      if (reply.signedOut && DECISIONS.has(name)) keepPending(name, data);
      apply(reply, true);
    } finally { state.busy = false; root.classList.remove("rg-busy"); }
  }

  // A decision made while signed out (the studio restarted) is kept in this tab and sent again once the user has
  // signed in: with its card's token, so one the studio had stored before the restart is answered "already
  // saved", and one it never saw is refused with the card reloaded ("decide again"), never stored twice.
  const DECISIONS = new Set(["decide", "adjudicate", "take"]);
  const PENDING = `regt-pending-${MODE}`;
  const PENDING_MAX_MS = 60 * 60 * 1000;
  function keepPending(name, data) {
    const user = state.boot && state.boot.user;
    try { sessionStorage.setItem(PENDING, JSON.stringify({ name, data, user, at: Date.now() })); } catch (err) { /* full or off */ }
  }
  function takePending(user) {
    let pending = null;
    try { pending = JSON.parse(sessionStorage.getItem(PENDING) || "null"); sessionStorage.removeItem(PENDING); } catch (err) { return null; }
    if (!pending || !DECISIONS.has(pending.name) || pending.user !== user || !(Date.now() - pending.at < PENDING_MAX_MS)) return null;
    return pending;
  }

  function act(action) {
    if (!state.key) { toast("no card is open: press N to load one", true); return; }
    if (action === "labels" && !state.picked.size) {
      toast("pick a class first (/ to search, or click a top-5 row), or use Z / X", true); return;
    }
    send(ADJ ? "adjudicate" : "decide", formData({ action }));
  }

  function takeAnswer(answerId) {
    if (!state.key) return;
    send("take", formData({ answer_id: answerId }));
  }

  function next() {
    if (ADJ) { if (state.key) send("skip", formData()); else send("disputed", {}); }
    else send("next", { filter: state.filter });
  }
  function skip() { if (!state.key) return next(); send("skip", formData()); }
  function undo() { send("undo", { filter: state.filter }); }
  function openImage(imageId, push) {
    if (state.busy) return;
    state.busy = true;
    call("open", { image_id: imageId, filter: state.filter })
      .then((reply) => apply(reply, push)).finally(() => { state.busy = false; });
  }

  $$(".rg-actions .rg-btn, .rg-save").forEach((b) => b.addEventListener("click", () => act(b.dataset.action)));
  $(".rg-skip").addEventListener("click", () => (ADJ ? next() : skip()));
  $(".rg-undo").addEventListener("click", undo);
  $(".rg-next").addEventListener("click", next);
  if (ADJ) { $(".rg-undo").hidden = true; $(".rg-skip").hidden = true; $(".rg-next").lastChild.textContent = " Next disputed"; }

  // -- address bar: a link per image, Back and Forward stay in the studio ----------------------------------------
  function address(imageId) {
    const params = new URLSearchParams();
    params.set("image", String(imageId));
    if (ADJ) params.set("tab", "adjudicate");
    return `?${params.toString()}`;
  }
  function updateAddress(imageId, push) {
    const url = address(imageId);
    $(".rg-link").href = url;
    const current = new URLSearchParams(location.search);
    const mine = ADJ ? current.get("tab") === "adjudicate" : current.get("tab") !== "adjudicate";
    if (current.get("image") === String(imageId) && mine) return;
    const entry = { regt: MODE, image: imageId };
    if (push) history.pushState(entry, "", url); else history.replaceState(entry, "", url);
  }
  window.addEventListener("popstate", (ev) => {
    const entry = ev.state;
    if (!entry || entry.regt !== MODE || !visible()) return;
    if (state.card && state.card.image_id === entry.image) return;
    if (ADJ) { state.busy = true; call("open", { image_id: entry.image }).then((r) => apply(r, false)).finally(() => { state.busy = false; }); }
    else openImage(entry.image, false);
  });
  $(".rg-link").addEventListener("click", (ev) => {
    ev.preventDefault();
    const url = new URL($(".rg-link").href, location.href).toString();
    if (navigator.clipboard) navigator.clipboard.writeText(url).then(() => toast(`link copied: ${url}`), () => toast(url));
    else toast(url);
  });

  function prefetch(urls) {
    state.prefetched = urls.map((u) => { const p = new Image(); p.decoding = "async"; p.src = u; return p; });
  }
  img.addEventListener("load", () => img.classList.remove("rg-loading"));
  img.addEventListener("error", () => img.classList.remove("rg-loading"));

  // -- queue filters (review) ------------------------------------------------------------------------------------
  function fillFilters(boot) {
    const status = $(".rg-f-status"), category = $(".rg-f-category");
    clear(status); clear(category);
    for (const o of boot.statuses || []) { const opt = make("option", "", o.label); opt.value = o.value; status.appendChild(opt); }
    const any = make("option", "", "any"); any.value = ""; category.appendChild(any);
    for (const o of boot.categories || []) { const opt = make("option", "", o.label); opt.value = o.value; category.appendChild(opt); }
    summarizeFilter();
  }
  function summarizeFilter() {
    const f = state.filter;
    const status = $(`.rg-f-status option[value="${f.status}"]`);
    const parts = [`queue: ${status ? status.textContent : f.status}`];
    if (f.class_index !== null && state.pendingFilterClass) parts.push(state.pendingFilterClass.name);
    if (f.category) parts.push(`consensus ${f.category}`);
    setText(".rg-filter-summary", parts.join(" · "));
  }
  const filterSearch = searcher($(".rg-f-class"), $(".rg-filters .rg-results"), (m) => {
    state.pendingFilterClass = m; setText(".rg-f-chosen", m.label);
  }, () => {});
  $(".rg-f-class").addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") { ev.preventDefault(); filterSearch.move(ev.key === "ArrowDown" ? 1 : -1); }
    else if (ev.key === "Enter") { ev.preventDefault(); ev.stopPropagation(); if (ev.target.value.trim()) filterSearch.pick(); else applyFilter(); }
    else if (ev.key === "Escape") { ev.target.blur(); }
  });
  $(".rg-f-clear").addEventListener("click", () => { state.pendingFilterClass = null; setText(".rg-f-chosen", "all classes"); });
  function applyFilter() {
    state.filter = {
      status: $(".rg-f-status").value || "open",
      category: $(".rg-f-category").value || null,
      class_index: state.pendingFilterClass ? state.pendingFilterClass.index : null,
    };
    summarizeFilter(); toggleFilters(false); send("next", { filter: state.filter });
  }
  $(".rg-f-apply").addEventListener("click", applyFilter);
  function toggleFilters(open) {
    const box = $(".rg-filters");
    box.hidden = open === undefined ? !box.hidden : !open;
    $(".rg-filter-toggle").setAttribute("aria-expanded", box.hidden ? "false" : "true");
    fit();
  }
  $(".rg-filter-toggle").addEventListener("click", () => toggleFilters());

  // -- adjudication list -----------------------------------------------------------------------------------------
  function renderList(rows) {
    state.list = rows;
    const box = clear($(".rg-list-items"));
    setText(".rg-list-head", rows.length ? `${rows.length} disputed image(s) · click one to open it` : "no disputed image left");
    for (const r of rows) {
      const li = make("li");
      li.dataset.imageId = String(r.image_id);
      li.append(make("div", "rg-path", `#${r.image_id} ${r.path}`), make("div", "rg-dim", `original: ${r.original}`));
      r.answers.forEach((a, i) => li.appendChild(make("div", "rg-answer", `${i + 1}. ${a.who}: ${a.what}`)));
      li.addEventListener("click", () => { if (!state.busy) send("open", { image_id: r.image_id }); });
      box.appendChild(li);
    }
    markCurrentInList();
  }
  function markCurrentInList() {
    const current = state.card ? String(state.card.image_id) : "";
    $$(".rg-list-items li").forEach((li) => {
      li.classList.toggle("rg-current", li.dataset.imageId === current);
      if (li.dataset.imageId === current) li.scrollIntoView({ block: "nearest" });
    });
  }

  // -- zoom and pan at full resolution ---------------------------------------------------------------------------
  const zoom = { open: false, s: 1, x: 0, y: 0, fit: 1, drag: null };
  const zoomBox = $(".rg-zoom"), zoomImg = $(".rg-zoom-img");
  zoomImg.id = `${MODE}-zoom-img`;
  function drawZoom() {
    zoomImg.style.transform = `translate(${zoom.x}px, ${zoom.y}px) scale(${zoom.s})`;
    setText(".rg-zoom-level", `${Math.round(zoom.s * 100)} %`);
    zoomBox.dataset.scale = String(zoom.s);
  }
  function fitZoom() {
    const w = zoomImg.naturalWidth || 1, h = zoomImg.naturalHeight || 1;
    const cw = zoomBox.clientWidth, ch = zoomBox.clientHeight - 32;
    zoom.fit = Math.min(cw / w, ch / h);
    zoom.s = zoom.fit; zoom.x = (cw - w * zoom.s) / 2; zoom.y = (ch - h * zoom.s) / 2;
    drawZoom();
  }
  function zoomAt(factor, px, py) {
    const s = Math.min(Math.max(zoom.s * factor, zoom.fit / 4, 0.02), 16);
    zoom.x = px - ((px - zoom.x) * s) / zoom.s; zoom.y = py - ((py - zoom.y) * s) / zoom.s; zoom.s = s;
    drawZoom();
  }
  async function openZoom(url) {
    if (!state.card && !url) return;
    zoom.open = true; zoomBox.hidden = false;
    const first = url || state.card.url;
    const swap = (src, keepView) => new Promise((resolve) => {
      const before = { w: zoomImg.naturalWidth, s: zoom.s };
      zoomImg.onload = () => {
        if (keepView && before.w) { zoom.s = (before.s * before.w) / zoomImg.naturalWidth; drawZoom(); } else fitZoom();
        resolve();
      };
      zoomImg.onerror = () => resolve();
      zoomImg.src = src;
    });
    if (first) await swap(first, false);
    if (url || !state.key) return;
    const reply = await call("full", { key: state.key });
    if (reply.error) { toast(reply.error, true, !!reply.signedOut); return; }
    if (!zoom.open || !reply.url) return;
    if (reply.url !== first) await swap(reply.url, true);
    zoomBox.dataset.full = "1";  // the original pixels are on screen
  }
  function closeZoom() { zoom.open = false; zoomBox.hidden = true; zoomBox.dataset.full = ""; }
  zoomBox.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = zoomBox.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  zoomBox.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest(".rg-zoom-bar")) return;
    zoom.drag = { x: ev.clientX - zoom.x, y: ev.clientY - zoom.y };
    zoomBox.setPointerCapture(ev.pointerId); zoomBox.classList.add("rg-dragging");
  });
  zoomBox.addEventListener("pointermove", (ev) => {
    if (!zoom.drag) return;
    zoom.x = ev.clientX - zoom.drag.x; zoom.y = ev.clientY - zoom.drag.y; drawZoom();
  });
  zoomBox.addEventListener("pointerup", () => { zoom.drag = null; zoomBox.classList.remove("rg-dragging"); });
  $(".rg-zoom-close").addEventListener("click", closeZoom);
  $(".rg-zoom-open").addEventListener("click", () => openZoom());
  img.addEventListener("click", () => openZoom());
  $$(".rg-ref").forEach((r) => r.addEventListener("click", () => { if (r.src) openZoom(r.src); }));
  function zoomKey(ev) {
    const k = ev.key, cx = zoomBox.clientWidth / 2, cy = zoomBox.clientHeight / 2;
    if (k === "Escape" || k === "f" || k === "F") closeZoom();
    else if (k === "+" || k === "=") zoomAt(1.25, cx, cy);
    else if (k === "-" || k === "_") zoomAt(0.8, cx, cy);
    else if (k === "0") fitZoom();
    else if (k.startsWith("Arrow")) {
      const step = 60;
      zoom.x += k === "ArrowLeft" ? step : k === "ArrowRight" ? -step : 0;
      zoom.y += k === "ArrowUp" ? step : k === "ArrowDown" ? -step : 0;
      drawZoom();
    } else return;
    ev.preventDefault(); ev.stopPropagation();
  }

  // -- reference thumbnails, my day and my recent decisions -------------------------------------------------------
  // A class's reference thumbnail: a reply names those already made (thumb: address); the others (thumb: "") are
  // made by one "thumbs" call after the list is drawn; thumb null: the dataset has no reference photo of it.
  function thumbImg(cls, entry) {
    const im = make("img", cls);
    im.loading = "lazy"; im.decoding = "async"; im.alt = "";
    im.title = `reference photo: ${entry.label}`;
    if (entry.thumb) im.src = entry.thumb;
    else if (entry.thumb === "") im.dataset.thumbClass = String(entry.index);
    else { im.classList.add("rg-noref"); im.title = `no reference photo of ${entry.label}`; }
    if (cls === "rg-topk-ref") {
      im.addEventListener("click", (ev) => { if (im.getAttribute("src")) { ev.stopPropagation(); openZoom(im.src); } });
      im.addEventListener("mouseenter", () => peekAt(im));
      im.addEventListener("mouseleave", () => { peek.hidden = true; });
    }
    return im;
  }
  // a top-5 photo is small in its row; hovering it shows it larger beside the panel
  const peek = make("img", "rg-peek");
  peek.alt = ""; peek.hidden = true; root.appendChild(peek);
  function peekAt(im) {
    if (!im.getAttribute("src")) return;
    const r = im.getBoundingClientRect();
    peek.src = im.src; peek.title = im.title;
    peek.style.left = `${Math.max(4, r.left - 124)}px`;
    peek.style.top = `${Math.min(window.innerHeight - 120, Math.max(4, r.top - 48))}px`;
    peek.hidden = false;
  }
  async function fillThumbs(box) {
    const missing = Array.from(box.querySelectorAll("img[data-thumb-class]")).filter((i) => !i.getAttribute("src"));
    if (!missing.length) return;
    const classes = [...new Set(missing.map((i) => Number(i.dataset.thumbClass)))].slice(0, 16);
    const reply = await call("thumbs", { classes, exclude: state.card ? state.card.image_id : null });
    const found = (reply && reply.thumbs) || {};
    for (const i of missing) {
      const url = found[i.dataset.thumbClass];
      delete i.dataset.thumbClass;
      if (url) i.src = url; else i.classList.add("rg-noref");
    }
  }
  function renderToday(today) {
    const box = $(".rg-today");
    box.hidden = !today;
    if (!today) return;
    const left = today.left === null || today.left === undefined ? "" : `${today.left} left for you · `;
    box.textContent = `${left}${today.today} decided today`;
    box.dataset.left = String(today.left); box.dataset.today = String(today.today);
  }
  async function toggleRecent() {
    const sheet = $(".rg-recent");
    if (!sheet.hidden) { sheet.hidden = true; return; }
    const reply = await call("recent", {});
    if (reply.error) { toast(reply.error, true, !!reply.signedOut); return; }
    const list = clear($(".rg-recent-items"));
    for (const d of reply.items || []) {
      const li = make("li", d.can_open ? "rg-can-open" : "");
      li.dataset.imageId = String(d.image_id);
      li.append(make("span", "rg-when", d.when), make("span", "rg-path", `#${d.image_id} ${d.path}`),
        make("span", "rg-what", `${d.lead ? "verdict: " : ""}${d.what}${d.undone ? " (undone)" : ""}`));
      if (d.can_open) {
        li.title = "open this image on the card to change the decision";
        li.addEventListener("click", () => {
          sheet.hidden = true;
          if (ADJ) send("open", { image_id: d.image_id }); else openImage(d.image_id, true);
        });
      } else li.title = "this image is no longer yours to open";
      list.appendChild(li);
    }
    if (!list.firstChild) list.appendChild(make("li", "rg-dim", "no decisions yet"));
    sheet.hidden = false;
  }
  $(".rg-today").addEventListener("click", toggleRecent);

  // -- comments on the image (O) and the labeling guidelines (G): text only, never markup ----------------------
  const commentBox = $(".rg-comment-input");
  function renderComments(comments) {
    const list = clear($(".rg-comments-items"));
    for (const c of comments) {
      const li = make("li");
      li.dataset.commentId = String(c.id);
      li.append(make("span", "rg-who", c.who), make("span", "rg-dim", ` ${c.when}: `), make("span", "rg-comment-text", c.text));
      list.appendChild(li);
    }
    closeComment();
  }
  // the block takes no room on a card without comments (the card fits 1280×720 without scrolling), until O
  const showComments = () => { $(".rg-comments").hidden = commentBox.hidden && !$(".rg-comments-items").firstChild; };
  function openComment() {
    if (!state.key) { toast("no card is open: press N to load one", true); return; }
    commentBox.hidden = false; showComments(); commentBox.focus();
    commentBox.scrollIntoView({ block: "nearest" });
  }
  function closeComment() { commentBox.value = ""; commentBox.hidden = true; showComments(); }
  async function saveComment() {
    const text = commentBox.value;
    if (!text.trim()) { closeComment(); return; }
    const key = state.key;
    const reply = await call("comment", { key, text });
    if (reply.error) { toast(reply.error, true, !!reply.signedOut); return; }
    if (state.card && state.card.image_id === reply.image_id) renderComments(reply.comments || []);
    toast(reply.message, false);
  }
  commentBox.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { ev.preventDefault(); ev.stopPropagation(); saveComment(); }
    else if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); closeComment(); }
  });
  commentBox.addEventListener("blur", () => { if (!commentBox.value.trim()) closeComment(); });

  const BLOCK_TAGS = { h1: "h1", h2: "h2", h3: "h3", li: "li", p: "p" };
  async function toggleGuidelines() {
    const sheet = $(".rg-guidelines");
    if (!sheet.hidden) { sheet.hidden = true; return; }
    const reply = await call("guidelines", {});
    if (reply.error) { toast(reply.error, true, !!reply.signedOut); return; }
    const body = clear($(".rg-guidelines-body"));
    const g = reply.guidelines;
    setText(".rg-guidelines-about", g ? g.about : reply.message);
    let list = null;
    for (const b of (g && g.blocks) || []) {
      const node = make(BLOCK_TAGS[b.kind] || "p");
      for (const [text, bold] of b.spans) node.appendChild(bold ? make("strong", "", text) : document.createTextNode(text));
      if (b.kind === "li") {
        if (!list) { list = make("ul"); body.appendChild(list); }
        list.appendChild(node);
      } else { list = null; body.appendChild(node); }
    }
    sheet.hidden = false;
  }

  // -- history and help sheets -----------------------------------------------------------------------------------
  async function toggleHistory() {
    const sheet = $(".rg-history");
    if (!sheet.hidden) { sheet.hidden = true; return; }
    if (!state.key) return;
    const reply = await call("history", { key: state.key });
    if (reply.error) { toast(reply.error, true, !!reply.signedOut); return; }
    const head = clear($(".rg-history-table thead")), body = clear($(".rg-history-table tbody"));
    const cols = ["#", "when", "who", "what", "replaced", "suggestion", "note", "seconds"];
    const tr = make("tr"); cols.forEach((c) => tr.appendChild(make("th", "", c))); head.appendChild(tr);
    for (const row of reply.rows) {
      const r = make("tr"); cols.forEach((c) => r.appendChild(make("td", "", row[c]))); body.appendChild(r);
    }
    if (!reply.rows.length) { const r = make("tr"); const td = make("td", "rg-dim", "no decisions yet"); td.colSpan = cols.length; r.appendChild(td); body.appendChild(r); }
    sheet.hidden = false;
  }
  function toggleHelp() {
    const sheet = $(".rg-help");
    if (sheet.hidden) {
      const body = clear($(".rg-help-table tbody"));
      for (const [k, v] of shortcuts()) { const r = make("tr"); r.append(make("td", "", k), make("td", "", v)); body.appendChild(r); }
    }
    sheet.hidden = !sheet.hidden;
  }
  $(".rg-history-toggle").addEventListener("click", toggleHistory);
  $(".rg-help-toggle").addEventListener("click", toggleHelp);
  $$(".rg-sheet-close").forEach((b) => b.addEventListener("click", () => { b.closest(".rg-sheet").hidden = true; }));

  // -- keyboard --------------------------------------------------------------------------------------------------
  const TEXT_TYPES = new Set(["text", "search", "email", "number", "password", "url", "tel"]);
  document.addEventListener("keydown", (ev) => {
    if (!visible() || !state.booted) return;
    if (zoom.open) { zoomKey(ev); return; }
    const t = ev.target;
    const typing = t && (t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable ||
      (t.tagName === "INPUT" && TEXT_TYPES.has(t.type)));
    if (typing) {
      if (ev.key === "Escape") { t.blur(); ev.preventDefault(); }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const key = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    let handled = true;
    if (ADJ && ev.shiftKey && /^Digit[1-9]$/.test(ev.code)) {
      const answer = state.answers[Number(ev.code.slice(5)) - 1];
      if (answer) takeAnswer(answer.id); else toast(`there is no answer ${ev.code.slice(5)} on this card`, true);
    } else if (key === "Escape") {
      $$(".rg-sheet").forEach((s) => { s.hidden = true; });
      toggleFilters(false);
    } else if (key in QUICK && !ev.shiftKey) act(QUICK[key]);
    else if (key === "Enter") act("labels");
    else if (flagOfKey(key)) toggleFlag(flagOfKey(key).name);
    else if (key === "/") $(".rg-query").focus();
    else if (key === "k") (ADJ ? next() : skip());
    else if (key === "u" && !ADJ) undo();
    else if (key === "n") next();
    else if (key === "f") openZoom();
    else if (key === "h") toggleHistory();
    else if (key === "g") toggleGuidelines();
    else if (key === "o") openComment();
    else if (key === "r") toggleRecent();
    else if (key === "?") toggleHelp();
    else handled = false;
    if (handled) { ev.preventDefault(); ev.stopPropagation(); }
  }, true);

  // -- fitting the card to the window ----------------------------------------------------------------------------
  function fit() {
    if (window.innerWidth <= 900) { root.style.height = ""; return; }
    const top = root.getBoundingClientRect().top + window.scrollY;
    root.style.height = `${Math.max(480, window.innerHeight - top - 18)}px`;
  }
  window.addEventListener("resize", fit);

  // -- start -----------------------------------------------------------------------------------------------------
  async function boot() {
    if (state.booted) return;
    state.booted = true;
    const params = new URLSearchParams(location.search);
    const wantsAdj = params.get("tab") === "adjudicate";
    const imageId = (ADJ === wantsAdj) ? params.get("image") : null;
    const reply = await call("boot", { image_id: imageId, filter: state.filter });
    state.boot = reply;
    setText(".rg-user", reply.user ? `${reply.user} (${reply.role})` : "");
    if (!ADJ) fillFilters(reply);
    renderFlags();
    apply(reply, false);
    fit();
    const pending = reply.user ? takePending(reply.user) : null;
    if (pending) await send(pending.name, pending.data);
    // a lead's Review card takes no card unasked, so it leaves an adjudication link in the address for the
    // Adjudicate card to open
    if (!ADJ && wantsAdj && reply.role === "lead") selectTab("Adjudicate");
  }
  function selectTab(name, tries = 40) {
    const button = Array.from(document.querySelectorAll("button[role=tab]")).find((b) => b.textContent.trim() === name);
    if (button && button.offsetParent !== null) button.click();
    else if (tries > 0) setTimeout(() => selectTab(name, tries - 1), 150);
  }
  if (ADJ) {
    setText(".rg-others-head", "annotators' answers (Shift+N takes answer N)");
    $(".rg-list").hidden = false;
    $(".rg-body").classList.add("rg-with-list");
    $(".rg-filter-toggle").hidden = true;
  }
  if (visible()) boot();
  else new IntersectionObserver((entries, obs) => {
    if (entries.some((e) => e.isIntersecting)) { obs.disconnect(); boot(); }
  }).observe(root);
})();
