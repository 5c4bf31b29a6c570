"""Our names as Kubernetes names (pools.engine.kube_names), checked against Kubernetes' rules written out here
independently: every name the configuration accepts maps to a valid value of every kind of field, the same name
always to the same value, and different names to different values; names that already fit are unchanged."""

import re
import zlib

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pools.engine import check_name
from pools.engine import kube_names as k

# k8s.io/apimachinery/pkg/util/validation, as written there.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_dns_label(text: str) -> bool:
    return len(text) <= 63 and bool(DNS_LABEL.fullmatch(text))


def is_subdomain(text: str) -> bool:
    return len(text) <= 253 and bool(SUBDOMAIN.fullmatch(text))


def is_label_value(text: str) -> bool:
    return text == "" or (len(text) <= 63 and bool(QUALIFIED.fullmatch(text)))


LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
ALNUM = LETTERS + "0123456789"
# What NAME_PATTERN accepts, up to the 128 characters the models hold.
names = st.builds(lambda first, middle, last: first + middle + last, st.sampled_from(LETTERS),
                  st.text(ALNUM + "_.-", max_size=126), st.sampled_from(ALNUM)) | st.sampled_from(LETTERS)
LONGEST = ["a" * 128, "A" * 128, "a" + "._" * 63 + "9", "Z" + "-" * 126 + "0", "x" + "9" * 127,
           "vision-long-" + "x" * 58, "a.b_c-D" * 18 + "12"]


def test_the_strategy_makes_only_names_the_configuration_accepts():
    for name in LONGEST:
        assert check_name(name, "Pool") == name and len(name) <= 128


@settings(max_examples=200, deadline=None)
@given(names)
@example("a" * 128)
@example("A" * 128)
@example("a" + "._" * 63 + "9")
@example("Z" + "-" * 126 + "0")
@example("x" + "9" * 127)
def test_every_accepted_name_maps_to_a_valid_value_of_every_field(name):
    check_name(name, "Project")
    assert is_dns_label(k.dns_label(name))
    assert is_label_value(k.label_value(name)) and k.label_value(name)
    assert is_label_value(k.label_key_name(name)) and k.label_key_name(name)
    assert is_dns_label(k.namespace(name))
    job = k.job_name(name)
    assert is_dns_label(job) and len(job) <= k.JOB_NAME_MAX
    assert is_dns_label(f"{job}-{10 ** 10 - 1}")  # the pod of the highest index: its hostname
    queue = k.dotted(name, name, name)
    assert is_subdomain(queue) and is_label_value(queue)
    assert is_subdomain(k.dotted(name, name, limit=k.SUBDOMAIN_MAX))
    # The same name, the same value: nothing random or process-dependent (Python's hash() is salted).
    assert k.label_value(name) == k.label_value(str(name)) and k.dns_label(name) == k.dns_label("".join(name))


@settings(max_examples=200, deadline=None)
@given(names, names)
@example("a" * 128, "a" * 127 + "b")
@example("vision-long-" + "x" * 58, "vision-long-" + "x" * 59)
@example("Training", "training")
@example("a.b", "a_b")
def test_different_names_map_to_different_values(a, b):
    if a == b:
        return
    assert k.label_value(a) != k.label_value(b)
    assert k.dns_label(a) != k.dns_label(b)
    assert k.job_name(a) != k.job_name(b)
    assert k.dotted(a, "d", "p") != k.dotted(b, "d", "p") and k.dotted("p", a, b) != k.dotted("p", b, a)
    if k.namespace(a) == k.namespace(b):  # only names that differ in case or in `_` / `.` against `-` share one
        assert a.lower().replace("_", "-").replace(".", "-") == b.lower().replace("_", "-").replace(".", "-")
        assert len(a) <= 58


def test_names_that_fit_are_unchanged_and_the_forms_already_in_clusters_stay():
    assert k.label_value("vision") == "vision" and k.label_value("a_B.c-9") == "a_B.c-9"
    assert k.label_value("x" * 63) == "x" * 63
    assert k.dns_label("training") == "training" and k.dns_label("x" * 63) == "x" * 63
    # KAI's queues have named capitals, `_` and `.` with a crc32 from the start.
    assert k.dns_label("shared_pool") == "shared-pool-1567c21e"
    assert k.dotted("training", "research", "vision") == "training.research.vision"
    assert k.namespace("vision") == "proj-vision" and k.namespace("My_Project.v2") == "proj-my-project-v2"
    assert k.namespace("x" * 58) == "proj-" + "x" * 58
    assert k.job_name("wl-6a66cab35edd-1") == "wl-6a66cab35edd-1"


def test_a_name_too_long_keeps_a_readable_beginning_and_a_hash_of_all_of_it():
    name = "vision-long-" + "x" * 58
    assert k.label_value(name) == "vision-long-" + "x" * 40 + "-" + k.digest(name)
    assert k.namespace(name) == "proj-vision-long-" + "x" * 35 + "-" + k.digest(name)
    dotty = "a" + "._" * 63 + "9"
    assert k.label_value(dotty) == "a-" + k.digest(dotty)  # the beginning ends at its last letter or digit
    assert k.label_value("ab" * 64) == "ab" * 26 + "-" + k.digest("ab" * 64)
    assert len(k.digest(name)) == 10 and k.digest(name) == k.digest(name)


def test_labelled_keeps_each_shortened_value_in_an_annotation_that_full_value_reads_back():
    long = "p" * 100
    labels, annotations = k.labelled("runwhere.ai/", {"managed-by": "osmo-pools", "pool": long, "project": "vision"})
    assert labels == {"runwhere.ai/managed-by": "osmo-pools", "runwhere.ai/pool": k.label_value(long),
                      "runwhere.ai/project": "vision"}
    assert annotations == {"runwhere.ai/pool": long}
    metadata = {"labels": labels, "annotations": annotations}
    assert k.full_value(metadata, "runwhere.ai/pool") == long
    assert k.full_value(metadata, "runwhere.ai/project") == "vision"
    assert k.full_value({}, "runwhere.ai/pool") == "" and k.full_value(None, "runwhere.ai/pool") == ""
    too_long = {"labels": {"runwhere.ai/pool": "training"}, "annotations": {"runwhere.ai/pool": "t" * 129}}
    assert k.full_value(too_long, "runwhere.ai/pool") == "training"  # no name of ours: the label it is
    assert k.labelled("runwhere.ai/", {"pool": "training"}) == ({"runwhere.ai/pool": "training"}, {})


def test_the_limits_hold_to_the_character():
    """Each limit at its edge (the mutation run's survivors, docs/development/mutation.md): a name exactly as long
    as its field allows is kept; one of a field's length that needs cleaning keeps the crc32 form, not the hash."""
    fits = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253: a subdomain's longest
    assert k.dotted("a" * 63, "b" * 63, "c" * 63, "d" * 61, limit=k.SUBDOMAIN_MAX) == fits
    assert k.dotted("a" * 63, "b" * 63, "c" * 63, "d" * 62, limit=k.SUBDOMAIN_MAX) != fits + "d"
    capitals = "A" * 63
    assert k.dns_label(capitals) == f"{'a' * 40}-{zlib.crc32(capitals.encode()):08x}"
    assert k.job_name("j" * 52) == "j" * 52  # a Job's longest name, kept
    one = {"labels": {"runwhere.ai/pool": "t"}, "annotations": {"runwhere.ai/pool": "T"}}
    assert k.full_value(one, "runwhere.ai/pool") == "T"  # a one-letter name is a name
