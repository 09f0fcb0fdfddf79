"""The works an evaluation report names, in full: a report lists those whose short form it uses (Works cited).

Each entry is (short forms as the report writes them, the reference). A short form is searched for in the report's
text, so a report cites exactly the works it names, and adding a work is one entry here.
"""

from __future__ import annotations

from collections.abc import Sequence

WORKS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("Beyer et al.", "ReaL"),
        "Beyer, L., Hénaff, O. J., Kolesnikov, A., Zhai, X., van den Oord, A. (2020). Are we done with ImageNet? "
        "arXiv:2006.07159. (ReaL: the reassessed labels and the ReaL rule.)",
    ),
    (
        ("Shankar et al.",),
        "Shankar, V., Roelofs, R., Mania, H., Fang, A., Recht, B., Schmidt, L. (2020). Evaluating Machine Accuracy "
        "on ImageNet. Proceedings of the 37th International Conference on Machine Learning (ICML), PMLR 119.",
    ),
    (
        ("Northcutt et al.",),
        "Northcutt, C. G., Athalye, A., Mueller, J. (2021). Pervasive Label Errors in Test Sets Destabilize Machine "
        "Learning Benchmarks. NeurIPS 2021 Datasets and Benchmarks Track; arXiv:2103.14749. (cleanlab's candidate "
        "label errors of ImageNet val and their MTurk review.)",
    ),
    (
        ("Stutz et al.",),
        "Stutz, D., Cemgil, A. T., Roy, A. G., Matejovicova, T., Barsbey, M., Strachan, P., et al. (2023). "
        "Evaluating AI systems under uncertain ground truth: a case study in dermatology. arXiv:2307.02191.",
    ),
    (
        ("ARGUS", "Joshi et al."),
        "Joshi, H., Kashyap, G. S., Ali, R., Shabbir, E., Jain, N., Jain, S., Gao, J., Naseem, U. (2025). Can Argus "
        "Judge Them All? Comparing VLMs Across Domains. arXiv:2507.01042. (ARGUS; the cross-dataset consistency "
        "(CDC) metric.)",
    ),
    (
        ("ImageNet-C", "Hendrycks"),
        "Hendrycks, D., Dietterich, T. (2019). Benchmarking Neural Network Robustness to Common Corruptions and "
        "Perturbations. International Conference on Learning Representations (ICLR). (ImageNet-C.)",
    ),
)
ARGUS_CITATION = "Joshi et al. (2025), *Can Argus Judge Them All? Comparing VLMs Across Domains*, arXiv:2507.01042"


def cited(text: str, works: Sequence[tuple[tuple[str, ...], str]] = WORKS) -> list[str]:
    """The references of the works whose short form appears in `text`, in the order of `works`."""
    return [reference for names, reference in works if any(name in text for name in names)]
