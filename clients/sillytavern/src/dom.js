// The one way the extension makes markup: elements whose text is always
// text, never HTML, whatever a server, a model or a chat put in it.

/** A DOM element; text children only ever become text nodes. */
export function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
        if (value === undefined || value === null || value === false) continue;
        node.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children) {
        if (child === null || child === undefined || child === false) continue;
        node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
}
