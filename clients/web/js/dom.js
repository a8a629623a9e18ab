// dom.js — the two DOM helpers every card of the page uses: $ (an element by id) and
// h (build an element with attributes, event handlers and children).

export const $ = (id) => document.getElementById(id);

/** h("div", {class: "x", onclick: f, hidden: true}, child, [children], "text") */
export const h = (tag, attrs = {}, ...kids) => {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) n.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) n.append(k);
  return n;
};
