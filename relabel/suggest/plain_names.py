"""Which class an answer names plainly, and which it names only around the object, for answer mapping.

`relabel.suggest.textmap` scores every class against an answer's phrase by names, descriptions and words. A class
the answer names outright can still lose there: to another class's short descriptions that share the answer's
other words ("a sleepy tabby on a patchwork quilt" is close to *quilt*'s "a patchwork quilt on a bed"), or to the
thing the object carries ("a wooden chest with a brass padlock"). `PlainNames` finds, by fixed rules over the
vocabulary's names:

- the classes named plainly: by the last words of the phrase's head before any "with", "that", "of" ('wooden chest
  with a brass padlock' -> *chest*), after modifiers only ('sleepy tabby' -> *tabby*, not 'porcini mushroom' ->
  *mushroom*), or by a closing appositive ('a small finch on a branch, a goldfinch');
- beside an object named plainly, the classes named only around it: in the scene it is in ('on a patchwork
  quilt') and after its "with" ('desk with a laptop and a lamp'). Where the object is named by no class ('books on
  a bookcase') the scene may be what the answer is about, and nothing is taken.

The mapper adds a bonus to the first and takes a penalty from the second (`textmap.PLAIN_NAME_BONUS`,
`AROUND_PENALTY`).
"""

from __future__ import annotations

from collections.abc import Callable

from relabel.suggest.phrases import (
    PLAIN_ADJECTIVES,
    appositive,
    head_of_name,
    is_adjective_shaped,
    name_candidates,
    scene_part,
)


class PlainNames:
    """Plain and surrounding names of a phrase, given the vocabulary's exact look-up (`named`: the classes a text
    names, `is_name`: whether it names any) and the words of its listed names (`listed_words`)."""

    def __init__(
        self, named: Callable[[str], list[int]], is_name: Callable[[str], bool], listed_words: set[str]
    ) -> None:
        self.named, self.is_name, self.listed_words = named, is_name, listed_words

    def plainly_named(self, phrase: str, core: str) -> list[int]:
        """The classes named by the last words of the core phrase's head ('wooden chest with a brass padlock' ->
        *chest*, 'sleepy tabby' -> *tabby*, 'mop and bucket' -> *swab*), else by a closing appositive ('small finch
        on a branch, a goldfinch'); empty when no such words name one."""
        for span in name_candidates(core, self.is_modifier):
            if (found := self.named(span)) and (span == core or not span.endswith(("ing", "ed"))):
                return found
        return self.named(named_last) if (named_last := appositive(phrase)) else []

    def named_around(self, phrase: str, core: str, plain: list[int]) -> list[int]:
        """Classes named by the words around an object named plainly (`plain`) rather than by it: in the scene
        ('tabby on a patchwork quilt' -> *quilt*) and after its "with" ('desk with a lamp' -> the lamp's class);
        never one of the `plain` classes, and none where no class is named plainly."""
        if not plain:  # 'books on a bookcase': the scene may be what the answer is about
            return []
        around = scene_part(phrase, core)
        accessory = core[len(head_of_name(core)) :]
        if accessory.startswith((" with ", " and ")):
            around = f"{accessory} {around}"
        said = around.split()
        found = {
            c
            for k in range(1, 4)
            for start in range(len(said) - k + 1)
            for c in self.named(" ".join(said[start : start + k]))
        }
        return sorted(found - set(plain))

    def is_modifier(self, word: str) -> bool:
        """Whether `word`, before a class name, only qualifies it: no name itself, and a colour, size or word shaped
        like an adjective, or no word of any listed name ('sleepy', 'rusty', 'orange'; not 'porcini', 'military')."""
        if self.is_name(word) and word not in PLAIN_ADJECTIVES:
            return False
        return is_adjective_shaped(word) or word not in self.listed_words
