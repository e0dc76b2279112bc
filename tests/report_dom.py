"""Read the HTML report back as a browser would, without one: a small element tree from html.parser,
and the text of a prompt with every link to a shared text replaced by that text (the page stores each
long text once). The browser tests do the same in Chromium's own DOM."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def elements(self) -> list[Element]:
        return [c for c in self.children if isinstance(c, Element)]

    def walk(self) -> list[Element]:
        out = [self]
        for child in self.elements():
            out += child.walk()
        return out

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        parent = self.stack[-1]
        # As the HTML parser does: one newline right after <pre> is not content.
        if parent.tag == "pre" and not parent.children and data.startswith("\n"):
            data = data[1:]
        if data:
            parent.children.append(data)


class Page:
    def __init__(self, html: str) -> None:
        builder = _Builder()
        builder.feed(html)
        builder.close()
        assert builder.stack == [builder.root], "unclosed elements"
        self.root = builder.root
        self.ids: dict[str, Element] = {}
        for element in self.root.walk():
            if "id" in element.attrs:
                assert element.attrs["id"] not in self.ids, f"duplicate id {element.attrs['id']}"
                self.ids[element.attrs["id"]] = element

    def resolved(self, element: Element) -> str:
        """The text an element stands for, each link inside a <pre> replaced by the text it points to."""
        out = []
        for child in element.children:
            if isinstance(child, str):
                out.append(child)
            elif child.tag == "a" and child.attrs.get("href", "").startswith("#"):
                out.append(self.resolved(self.ids[child.attrs["href"][1:]]))
            else:
                out.append(self.resolved(child))
        return "".join(out)

    def call(self, ident: str) -> tuple[list[str], str]:
        """A call's messages and reply, as the page shows them, shared texts filled in."""
        pres = []
        for child in self.ids[ident].elements():
            pres += [child] if child.tag == "pre" else [c for c in child.elements() if c.tag == "pre"]
        *messages, reply = pres
        assert reply.attrs.get("class") == "reply"
        return [self.resolved(m) for m in messages], self.resolved(reply)
