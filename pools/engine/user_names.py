"""User names that cannot pass for another (pure: no Django). An identity provider's name (and one an admin
creates) is refused when it is not in Unicode NFKC form (alice in fullwidth letters would read as alice) or when its
letters and digits mix scripts (alice with a Cyrillic a reads as alice in every list and in the audit log). A name
in one script stays welcome ("José-Łukasz", "山田太郎"); Japanese may mix Han, Hiragana and Katakana, Korean Hangul and
Han. A name written wholly in another script's look-alikes (ace in Cyrillic letters) is not caught: that needs
Unicode's confusables table, which the standard library does not carry."""

import unicodedata

# Unicode character names start with their script's name; these belong together.
_SAME = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "IDEOGRAPHIC": "CJK", "ARABIC-INDIC": "ARABIC",
         "EXTENDED": "ARABIC"}


def _script(char: str) -> str | None:
    """The script of a letter or digit (ASCII ones are Latin; digits 0-9 are common); None for the rest."""
    if char.isascii():
        return "LATIN" if char.isalpha() else None
    if unicodedata.category(char)[0] not in "LN":
        return None
    word = unicodedata.name(char, "UNKNOWN").split(" ", 1)[0]
    return _SAME.get(word, word)


def user_name_problem(name: str) -> str | None:
    """Why `name` could pass for another user's name, or None."""
    if unicodedata.normalize("NFKC", name) != name:
        return f"{name!r} is not in Unicode's NFKC form: it reads as {unicodedata.normalize('NFKC', name)!r}"
    scripts = sorted({script for char in name if (script := _script(char)) is not None})
    if len(scripts) > 1:
        return (f"{name!r} mixes scripts ({', '.join(s.title() for s in scripts)}): it could pass for another "
                "user's name")
    return None
