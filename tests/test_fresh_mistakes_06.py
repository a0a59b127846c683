"""Wrong answers to the exercises of notebook 06, written fresh for issue 33 the way a class writes them
(before the checks were read), each with the mistake code a fair check should name, or None where only
"differs ..." is honest. No wrong answer may pass, none may get a wrong name, and each one that expects a
code must get it."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import check_greedy_decode, check_label_smoothing_loss, check_train_step, check_transformer_lr

from conftest import assert_fresh, assert_named_share

pytestmark = pytest.mark.guarded  # the off-limits guard on, as in a notebook: one wrong answer calls a built-in

# ----------------------------------------------------------------------------------------- transformer_lr


def lr_power_precedence(step, d_model, warmup):
    return d_model ** -1/2 * min(step ** -1/2, step * warmup ** -3/2)


def lr_warmup_sqrt(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)


def lr_no_d_model(step, d_model, warmup):
    return min(step ** -0.5, step * warmup ** -1.5)


def lr_max(step, d_model, warmup):
    return d_model ** -0.5 * max(step ** -0.5, step * warmup ** -1.5)


def lr_from_zero(step, d_model, warmup):
    step = step + 1  # "the loop counts from 0"
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def lr_decay_only(step, d_model, warmup):
    return d_model ** -0.5 * step ** -0.5


def lr_sqrt_d_model(step, d_model, warmup):
    return math.sqrt(d_model) * min(step ** -0.5, step * warmup ** -1.5)


def lr_warmup_no_step(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, warmup ** -1.5)


def lr_swapped(step, warmup, d_model):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def lr_tensor(step, d_model, warmup):
    step = torch.tensor(float(step))
    return d_model ** -0.5 * torch.minimum(step ** -0.5, step * warmup ** -1.5)


def lr_list(step, d_model, warmup):
    return [d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)]


def lr_warmup_exponent_positive(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** 1.5)


def lr_factor_only_after_warmup(step, d_model, warmup):
    if step < warmup:
        return step * warmup ** -1.5
    return d_model ** -0.5 * step ** -0.5


def lr_decay_exponent_positive(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** 0.5, step * warmup ** -1.5)


# ----------------------------------------------------------------------------------- LabelSmoothingLoss


def loss_class(forward):
    class LabelSmoothingLoss(nn.Module):
        def __init__(self, smoothing=0.1, pad_id=0):
            super().__init__()
            self.smoothing = smoothing
            self.pad_id = pad_id

    LabelSmoothingLoss.forward = forward
    return LabelSmoothingLoss


def ls_all_positions(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    return -(smoothed * log_probs).sum(-1).mean()


def ls_mean_of_real(self, logits, target):
    """The mean over the real positions, with nothing for a batch of pads only (0 / 0 = nan there)."""
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    mask = target != self.pad_id
    return (loss * mask).sum() / mask.sum()


def ls_t2t(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / (V - 1))
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_annotated(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / (V - 2))
    smoothed[..., self.pad_id] = 0
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_sum(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    return loss[target != self.pad_id].sum()


def ls_plain(self, logits, target):
    log_probs = torch.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    keep = target != self.pad_id
    return nll[keep].mean()


def ls_probabilities(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    probs = torch.softmax(logits, dim=-1)
    smoothed = torch.full_like(probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_mean_over_vocabulary(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).mean(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_kl(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = F.kl_div(log_probs, smoothed, reduction="none").sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_item(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean().item()


def ls_new_tensor(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return torch.tensor(loss[keep].mean().item())


def ls_log_of_softmax(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log(torch.softmax(logits, dim=-1))
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_no_minus(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = (smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_in_place_shift(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    logits -= logits.max(dim=-1, keepdim=True).values  # "for stability", in place
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_per_sentence_mean(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = (target != self.pad_id).float()
    return ((loss * keep).sum(1) / keep.sum(1)).mean()


def ls_divide_by_all(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return (loss * keep).sum() / target.numel()


def ls_pad_zero(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != 0
    return loss[keep].mean()


def ls_no_eps_over_v_on_right(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


def ls_builtin(self, logits, target):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), label_smoothing=self.smoothing,
                           ignore_index=self.pad_id)


def ls_softmax_wrong_axis(self, logits, target):
    eps, V = self.smoothing, logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=1)
    smoothed = torch.full_like(log_probs, eps / V)
    smoothed.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V)
    loss = -(smoothed * log_probs).sum(-1)
    keep = target != self.pad_id
    return loss[keep].mean()


# -------------------------------------------------------------------------------------------- train_step


def ts_no_zero_grad(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_zero_after_backward(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_no_shift(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt), tgt)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_target_not_shifted(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, :-1])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_reversed(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, 1:]), tgt[:, :-1])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_scheduler_first(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    scheduler.step()
    optimizer.step()
    return loss.item()


def ts_no_scheduler(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_eval(model, src, tgt, optimizer, scheduler, loss_fn):
    model.eval()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_train_no_call(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_tensor(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.detach()


def ts_clip(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_detached_logits(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    logits = model(src, tgt[:, :-1]).detach()
    loss = loss_fn(logits, tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_detached_repaired(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    logits = model(src, tgt[:, :-1]).detach()
    loss = loss_fn(logits, tgt[:, 1:])
    loss.requires_grad_()  # "element 0 of tensors does not require grad" went away
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_new_tensor(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_no_grad_forward(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    with torch.no_grad():
        logits = model(src, tgt[:, :-1])
    loss = loss_fn(logits, tgt[:, 1:]).requires_grad_()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_per_sentence(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    logits = model(src, tgt[:, :-1])
    losses = [loss_fn(logits[i:i + 1], tgt[i:i + 1, 1:]) for i in range(len(src))]
    loss = torch.stack(losses).mean()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_no_optimizer_step(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    scheduler.step()
    return loss.item()


def ts_scheduler_twice(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    scheduler.step()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_src_shifted_too(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src[:, :-1], tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def ts_zero_between_step_and_backward_never(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad  # forgot the call
    return loss.item()


# ----------------------------------------------------------------------------------------- greedy_decode


def gd_first_position(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, 0].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:]


def gd_stop_any(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            next_token = logits[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, next_token], dim=1)
            if (next_token == end_id).any():
                break
        return ys[:, 1:]


def gd_no_causal(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_src_mask(ys))  # the padding mask only
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:]


def gd_keeps_start(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys


def gd_never_stops(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return ys[:, 1:]


def gd_stop_all_this_step(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            next_token = logits[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, next_token], dim=1)
            if (next_token == end_id).all():
                break
        return ys[:, 1:]


def gd_no_src_mask(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        memory = model.encode(src, None)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, None, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:]


def gd_one_step_short(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len - 1):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:]


def gd_one_step_long(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len + 1):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return ys[:, 1:]


def gd_probabilities(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return logits.softmax(-1).max(-1).values


def gd_unsqueeze_wrong_axis(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            next_token = logits[:, -1].argmax(-1).unsqueeze(0)  # (1, batch): the wrong axis
            ys = torch.cat([ys, next_token], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:]


def gd_stops_after_first_end_row_loop(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if end_id in ys[:, -1]:
                break
        return ys[:, 1:]


def gd_returns_list(model, src, max_len, start_id, end_id):
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:].tolist()


# (exercise, what the student did, the wrong answer, the code a fair check names or None)
FRESH = [
    ("transformer_lr", "x ** -1/2 for the exponents", lr_power_precedence, "power_precedence"),
    ("transformer_lr", "warm-up branch step * warmup^-0.5", lr_warmup_sqrt, "warmup_exponent"),
    ("transformer_lr", "no d_model^-0.5 factor", lr_no_d_model, "no_d_model_factor"),
    ("transformer_lr", "max in place of min", lr_max, "max_instead_of_min"),
    ("transformer_lr", "steps counted from 0 (step + 1)", lr_from_zero, "steps_from_zero"),
    ("transformer_lr", "only the decay branch", lr_decay_only, "no_warmup"),
    ("transformer_lr", "sqrt(d_model) in front", lr_sqrt_d_model, "d_model_factor_inverted"),
    ("transformer_lr", "warm-up branch without step", lr_warmup_no_step, "warmup_without_step"),
    ("transformer_lr", "parameters d_model and warmup swapped", lr_swapped, "d_model_warmup_swapped"),
    ("transformer_lr", "returns a torch tensor", lr_tensor, "not_a_number"),
    ("transformer_lr", "returns a one-element list", lr_list, "not_a_number"),
    ("transformer_lr", "warmup ** 1.5 (sign lost): the decay branch always wins", lr_warmup_exponent_positive,
     "no_warmup"),
    ("transformer_lr", "d_model factor only after the warm-up", lr_factor_only_after_warmup, None),
    ("transformer_lr", "step ** 0.5 in the decay branch", lr_decay_exponent_positive, None),
    ("label_smoothing_loss", "mean over every position, pads included", loss_class(ls_all_positions),
     "padding_not_ignored"),
    ("label_smoothing_loss", "tensor2tensor's eps / (V - 1)", loss_class(ls_t2t), "smoothing_mass_wrong"),
    ("label_smoothing_loss", "the Annotated Transformer's eps / (V - 2)", loss_class(ls_annotated),
     "annotated_smoothing"),
    ("label_smoothing_loss", "sum in place of the mean", loss_class(ls_sum), "not_averaged_over_real_tokens"),
    ("label_smoothing_loss", "no smoothing", loss_class(ls_plain), "no_smoothing"),
    ("label_smoothing_loss", "softmax in place of log_softmax", loss_class(ls_probabilities),
     "probabilities_not_log"),
    ("label_smoothing_loss", "mean over the vocabulary", loss_class(ls_mean_over_vocabulary),
     "averaged_over_vocabulary"),
    ("label_smoothing_loss", "F.kl_div", loss_class(ls_kl), "kl_divergence"),
    ("label_smoothing_loss", "returns .item()", loss_class(ls_item), "not_differentiable"),
    ("label_smoothing_loss", "returns torch.tensor(value)", loss_class(ls_new_tensor), "not_differentiable"),
    ("label_smoothing_loss", "log of softmax", loss_class(ls_log_of_softmax), "log_of_softmax"),
    ("label_smoothing_loss", "no minus sign", loss_class(ls_no_minus), "sign_flipped"),
    ("label_smoothing_loss", "logits shifted in place", loss_class(ls_in_place_shift), "changed_input"),
    ("label_smoothing_loss", "mean per sentence, then over the batch", loss_class(ls_per_sentence_mean),
     "not_averaged_over_real_tokens"),
    ("label_smoothing_loss", "sum over real tokens divided by every position", loss_class(ls_divide_by_all),
     "not_averaged_over_real_tokens"),
    ("label_smoothing_loss", "pad id 0 hard-coded", loss_class(ls_pad_zero), "pad_id_hardcoded"),
    ("label_smoothing_loss", "1 - eps on the right token (sums to 1 - eps / V... )",
     loss_class(ls_no_eps_over_v_on_right), "smoothing_mass_wrong"),
    ("label_smoothing_loss", "F.cross_entropy(label_smoothing=)", loss_class(ls_builtin), "used_off_limits"),
    ("label_smoothing_loss", "log_softmax over the positions axis", loss_class(ls_softmax_wrong_axis),
     "softmax_wrong_axis"),
    ("label_smoothing_loss", "the count of real positions not guarded (a batch of pads only)",
     loss_class(ls_mean_of_real), "all_pad_batch"),
    ("train_step", "zero_grad never called", ts_no_zero_grad, "no_zero_grad"),
    ("train_step", "zero_grad after backward", ts_zero_after_backward, "zero_grad_after_backward"),
    ("train_step", "no shift at all", ts_no_shift, "no_shift"),
    ("train_step", "the target not shifted", ts_target_not_shifted, "no_shift"),
    ("train_step", "shift reversed", ts_reversed, "shift_reversed"),
    ("train_step", "scheduler before optimizer", ts_scheduler_first, "scheduler_first"),
    ("train_step", "no scheduler step", ts_no_scheduler, "no_scheduler_step"),
    ("train_step", "model.eval()", ts_eval, "eval_mode"),
    ("train_step", "model.train without ()", ts_train_no_call, "eval_mode"),
    ("train_step", "returns the loss tensor", ts_tensor, "loss_tensor"),
    ("train_step", "gradient clipping", ts_clip, "gradient_clipped"),
    ("train_step", "detached logits", ts_detached_logits, "no_gradient"),
    ("train_step", "detached logits, loss.requires_grad_()", ts_detached_repaired, "no_gradient"),
    ("train_step", "torch.tensor(loss.item(), requires_grad=True)", ts_new_tensor, "no_gradient"),
    ("train_step", "forward under no_grad, loss.requires_grad_()", ts_no_grad_forward, "no_gradient"),
    ("train_step", "loss per sentence, then the mean over the batch", ts_per_sentence, "per_sentence_mean"),
    ("train_step", "no optimizer.step()", ts_no_optimizer_step, "no_optimizer_step"),
    ("train_step", "scheduler stepped twice", ts_scheduler_twice, None),
    ("train_step", "source shifted too", ts_src_shifted_too, None),
    ("train_step", "optimizer.zero_grad without ()", ts_zero_between_step_and_backward_never, "no_zero_grad"),
    ("greedy_decode", "reads the first position", gd_first_position, "first_position"),
    ("greedy_decode", "stops when any row produces end_id", gd_stop_any, "stops_at_first_end"),
    ("greedy_decode", "end_id in the last column", gd_stops_after_first_end_row_loop, "stops_at_first_end"),
    ("greedy_decode", "no causal mask", gd_no_causal, "no_causal_mask"),
    ("greedy_decode", "keeps the start token", gd_keeps_start, "keeps_start_token"),
    ("greedy_decode", "never stops early", gd_never_stops, "no_early_stop"),
    ("greedy_decode", "stops only when all rows end at the same step", gd_stop_all_this_step, "no_early_stop"),
    ("greedy_decode", "no source mask", gd_no_src_mask, "no_src_mask"),
    ("greedy_decode", "range(max_len - 1)", gd_one_step_short, "stops_too_early"),
    ("greedy_decode", "range(max_len + 1), no stop", gd_one_step_long, "more_than_max_len"),
    ("greedy_decode", "returns probabilities", gd_probabilities, "not_token_ids"),
    ("greedy_decode", "next token unsqueezed on the wrong axis", gd_unsqueeze_wrong_axis, None),
    ("greedy_decode", "returns a list", gd_returns_list, None),
]

CHECKS = {"transformer_lr": check_transformer_lr, "label_smoothing_loss": check_label_smoothing_loss,
          "train_step": check_train_step, "greedy_decode": check_greedy_decode}


@pytest.mark.parametrize("exercise, what, wrong, code", FRESH, ids=[f"{e}: {w}" for e, w, _, _ in FRESH])
def test_fresh_wrong_answer(exercise, what, wrong, code):
    assert_fresh(CHECKS[exercise], wrong, what, code)


def test_named_share():
    assert_named_share([code for _, _, _, code in FRESH])
