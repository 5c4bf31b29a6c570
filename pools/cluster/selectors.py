"""Label selectors as the API server reads them, for the simulated cluster: `key=value` (or `==`), `key!=value`,
`key` (present) and `!key` (absent), comma-separated, all of which must hold."""

from collections.abc import Callable, Mapping


def label_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A predicate over a label dict; raises ValueError naming a term it cannot read."""
    terms: list[tuple[str, str, str]] = []
    for term in (part.strip() for part in (text or "").split(",")):
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in term:
            key, value = term.replace("==", "=", 1).split("=", 1)
            terms.append((key.strip(), "=", value.strip()))
        elif term.startswith("!"):
            terms.append((term[1:].strip(), "absent", ""))
        elif " " not in term and "(" not in term:
            terms.append((term, "present", ""))
        else:
            raise ValueError(f"unable to parse requirement: {term!r}")

    def matches(labels: Mapping[str, str]) -> bool:
        for key, op, value in terms:
            if (op == "=" and labels.get(key) != value) or (op == "!=" and labels.get(key) == value) \
                    or (op == "present" and key not in labels) or (op == "absent" and key in labels):
                return False
        return True

    return matches
