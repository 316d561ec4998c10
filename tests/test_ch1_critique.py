"""The stage note on chapter 1's critique page (book/ch1_critique.md) states where the committed
toy-vit stands against the targets chapter 0 binds to it; the check reads the checkpoint's own
held-out record (checkpoints/toy-vit.metrics.json) through the targets (STAGE_TARGETS), so a
retrained checkpoint that moves across a target makes this test fail until the note is rewritten."""
from pathlib import Path

from critique_claims import checkpoint_test_record
from fgclip.studies.stage_report import record_against_targets

ROOT = Path(__file__).resolve().parents[1]


def test_stage_note_matches_the_checkpoint_record():
    page = " ".join((ROOT / "book" / "ch1_critique.md").read_text().split())
    note = record_against_targets("toy-vit", checkpoint_test_record("toy-vit"))
    assert note in page, f"book/ch1_critique.md does not say that toy-vit {note!r} (its checkpoint record)"


def test_the_check_fails_when_the_record_moves_across_a_target():
    page = " ".join((ROOT / "book" / "ch1_critique.md").read_text().split())
    test = checkpoint_test_record("toy-vit")
    for moved in ({**test, "i2t_R@1": 0.5}, {**test, "zero_shot_shape_acc": 0.99, "i2t_R@1": 0.99},
                  {**test, "zero_shot_shape_acc": 0.5, "i2t_R@1": 0.5}):
        if record_against_targets("toy-vit", moved) != record_against_targets("toy-vit", test):
            assert record_against_targets("toy-vit", moved) not in page


CONTROL = "moved by one constant so that their mean lies a margin above the pointer's"


def test_the_pages_positive_controls_are_the_ones_the_chapter_runs():
    """The critique page says how the positive controls are planted; the notebook and the bias
    module must plant them that way (the model's own scores re-centred a margin above the
    comparator), and the planted arm must then sit exactly a margin above it."""
    import numpy as np

    from fgclip.studies.maximage import evaluation as ev

    page = " ".join((ROOT / "book" / "ch1_critique.md").read_text().split())
    assert CONTROL in page and "biased model's own centre-cell shares moved to lie a margin above" in page
    notebook = (ROOT / "notebooks" / "ch1_maximage.py").read_text()
    assert 'ev.planted_effect_scores(gx[M], gx["object pointer"], margin)' in notebook
    bias = (ROOT / "src" / "fgclip" / "studies" / "maximage" / "bias.py").read_text()
    assert "planted_effect_scores(sweep.share_zero[top], sweep.share_zero[0.0], share_margin)" in bias
    model, pointer = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]), np.full((2, 3), 0.6)
    assert abs(ev.planted_effect_scores(model, pointer, 0.05).mean() - (0.6 + 0.05)) < 1e-12
    # the design the page rejects: a quarter of the misses planted into a model far below the pointer
    assert model.mean() + 0.25 * (1 - model.mean()) < pointer.mean()


def test_the_control_check_fails_on_a_page_that_describes_another_plant():
    page = " ".join((ROOT / "book" / "ch1_critique.md").read_text().split())
    assert CONTROL not in page.replace("moved by one constant", "with a share of points sent to their box")
