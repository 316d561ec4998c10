"""ASL against timm's AsymmetricLossMultiLabel where the two definitions meet (issue 35, item 9).

They meet on sigmoid probabilities: timm takes logits x and uses p = sigmoid(x); ours takes
p itself (chapter 4 feeds it softmax-over-categories probabilities, which timm's loss cannot
take). Both weight a positive by (1 - p)^γ+ and a negative by p_m^γ- with the shifted
probability p_m = max(p - m, 0), and both let gradients through those weights (timm's
``disable_torch_grad_focal_loss=False``, its default). timm's 'sum' and 'mean' are ours over
fully known labels; with unknown labels (which timm has no value for) P-ASL is timm's
per-entry loss summed over the known entries and divided by their number. The two clamp
differently only for probabilities within 1e-8 of 0 or 1, so the logits here stay in [-6, 6].
"""
import pytest
import torch

from fgclip.losses.asymmetric import asymmetric_loss_terms, partial_asymmetric_loss, partial_bce
from fgclip.partial_labels import UNKNOWN

AsymmetricLossMultiLabel = pytest.importorskip("timm.loss").AsymmetricLossMultiLabel
SETTINGS = [(1.0, 2.0, 0.05), (0.0, 4.0, 0.05), (2.0, 1.0, 0.2), (1.0, 3.0, 0.0)]


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.rand(16, 12, generator=g, dtype=torch.float64) * 12 - 6).float()
    labels = (torch.rand(16, 12, generator=g) < 0.3).float()
    return logits, labels


@pytest.mark.parametrize("gamma_pos, gamma_neg, clip", SETTINGS)
def test_asl_is_timms_on_fully_known_labels(gamma_pos, gamma_neg, clip):
    logits, labels = _batch()
    for reduction in ("sum", "mean"):
        timm = AsymmetricLossMultiLabel(gamma_neg=gamma_neg, gamma_pos=gamma_pos, clip=clip, reduction=reduction)
        x_ours, x_timm = logits.clone().requires_grad_(), logits.clone().requires_grad_()
        ours = partial_asymmetric_loss(torch.sigmoid(x_ours), labels, gamma_pos, gamma_neg, clip, reduction=reduction)
        ref = timm(x_timm, labels)
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
        ours.backward(), ref.backward()
        torch.testing.assert_close(x_ours.grad, x_timm.grad, rtol=1e-4, atol=1e-6)


def test_partial_asl_is_timms_per_entry_loss_over_the_known_entries():
    logits, labels = _batch(1)
    known = torch.rand(labels.shape, generator=torch.Generator().manual_seed(2)) < 0.6
    targets = torch.where(known, labels, torch.full_like(labels, UNKNOWN))
    per_entry = AsymmetricLossMultiLabel(gamma_neg=2.0, gamma_pos=1.0, clip=0.05, reduction="none")(logits, labels)
    p = torch.sigmoid(logits)
    torch.testing.assert_close(asymmetric_loss_terms(p, targets), torch.where(known, per_entry, 0.0),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(partial_asymmetric_loss(p, targets), per_entry[known].mean(), rtol=1e-5, atol=1e-6)
    # with γ± = m = 0 both are binary cross-entropy
    bce = AsymmetricLossMultiLabel(gamma_neg=0, gamma_pos=0, clip=0, reduction="none")(logits, labels)
    torch.testing.assert_close(partial_bce(p, targets), bce[known].mean(), rtol=1e-5, atol=1e-6)
