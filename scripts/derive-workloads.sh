#!/usr/bin/env bash
# derive-workloads.sh — the arithmetic behind examples/understanding-qwen3-30b-a3b.json and
# examples/generation-mmdit-20b.json (docs/workloads.md explains every line). Change a number
# below, rerun, and copy the printed "cost" objects into the specs.
#
#   bash scripts/derive-workloads.sh
#
# Conventions: bf16 activations and weights; MiB = 2^20 bytes; every memory figure is per GPU;
# one pipeline "rank" is a tensor-parallel pair of GPUs (TP = 2 with sequence parallelism), so
# a rank's compute rate is TP x peak x efficiency and activations are split over the TP GPUs.
awk '
function mib(bytes) { return bytes / 1048576 }
function ms(flop)   { return flop / RATE * 1e3 }
BEGIN {
    # ---- cluster and device (H100-like)
    PEAK = 989e12; EFF = 0.40; TP = 2; PP = 8; DP = 4        # 64 GPUs = PP 8 x TP 2 x DP 4
    RATE = TP * PEAK * EFF                                   # FLOP/s of one rank (TP pair)
    REPL = PP * DP                                           # replicas of a nested module (TP pairs)

    # ---- backbone: Qwen3-30B-A3B (48 layers, hidden 2048, 32 q heads x 128, 4 kv heads x 128,
    #      128 experts top-8, expert ffn 768, vocab 151936, untied embeddings)
    L = 48; H = 2048; DQ = 32 * 128; DKV = 4 * 128; E = 128; K = 8; FE = 768; VOC = 151936; S = 8192
    attn_p   = L * (H * DQ + 2 * H * DKV + DQ * H)
    expert_p = L * E * 3 * H * FE
    router_p = L * H * E
    embed_p  = 2 * VOC * H
    dense_p  = attn_p + router_p + embed_p
    total_p  = dense_p + expert_p
    active_p = 3.3e9                                         # published; = dense + 8/128 of experts
    lin_f    = 2 * active_p * S
    attn_f   = L * 2 * S * S * DQ                            # QK^T + AV, causal (half of 4 s^2 d)
    bb_fwd   = lin_f + attn_f
    bb_bwd   = 2 * lin_f + 2.5 * attn_f                      # FlashAttention bwd = 2.5x its fwd
    bb_act_tok_layer = 45 * H                                # bytes, see docs/workloads.md
    bb_act   = bb_act_tok_layer * S * L / TP
    # state per GPU: experts EP-sharded over the 8 GPUs of a stage (ETP 1, expert-DP 1, so
    # 16 B/param); dense params TP-split, ZeRO-1 over DP: 2 + 2 + 12/DP bytes per param
    bb_state_gpu = expert_p / PP / (TP * DP) * 16 + dense_p / PP / TP * (4 + 12 / DP)
    bb_out   = S * H * 2 / TP

    # ---- encoder: 1.3B ViT (24 layers, hidden 2048, ffn 8192, patch 14, 2x2 merger MLP)
    #      4 images of 448x448 per microbatch = 4 x 32 x 32 = 4096 patches -> 1024 visual tokens
    VL = 24; VH = 2048; VIMG = 4; VPATCH = 1024; VP = 1.3e9
    vs = VIMG * VPATCH
    vit_lin  = 2 * VP * vs
    vit_attn = VL * VIMG * 4 * VPATCH * VPATCH * VH          # bidirectional, per image
    vit_fwd  = vit_lin + vit_attn
    vit_bwd  = 2 * vit_lin + 2.5 * vit_attn
    vit_act  = 34 * VH * vs * VL / TP                        # Korthikanti selective recompute
    vit_state = VP / TP * (2 + 2 + 12 / REPL)                # ZeRO-1 over all replicas
    vit_out  = vs / 4 * H * 2 / TP                           # 1024 merged tokens, backbone width

    # ---- generator: 20B MMDiT (Qwen-Image-like: 60 double-stream blocks, hidden 3072,
    #      ffn 4x, adaLN modulation), one 512x512 target: 64x64 latent, patch 2 -> 1024 image
    #      tokens, plus 1024 conditioning tokens from the backbone
    GL = 60; GH = 3072; GIMG = 1024; GCOND = 1024
    g_tok_p  = GL * 12 * GH * GH                             # per-token weights (one stream)
    g_total  = GL * 2 * (12 + 6) * GH * GH                   # both streams + adaLN
    gs = GIMG + GCOND
    g_lin  = 2 * g_tok_p * gs
    g_attn = GL * 4 * gs * gs * GH                           # joint bidirectional attention
    g_fwd  = g_lin + g_attn
    g_bwd  = 2 * g_lin + 2.5 * g_attn
    g_act  = 34 * GH * gs * GL / TP
    # weights and grads ZeRO-3 over the DP replicas of the same pipeline rank (lock step),
    # optimizer state ZeRO-1 over all replicas
    g_state = g_total / TP * (2 / DP + 2 / DP + 12 / REPL)

    printf "rank rate %.1f TFLOP/s (TP %d x %.0f x %.2f)\n\n", RATE / 1e12, TP, PEAK / 1e12, EFF
    printf "backbone params: total %.3fB (experts %.3fB, dense %.3fB), active %.2fB\n",
           total_p / 1e9, expert_p / 1e9, dense_p / 1e9, active_p / 1e9
    printf "  fwd %.2f TFLOP (linear %.2f + attention %.2f), bwd %.2f TFLOP\n",
           bb_fwd / 1e12, lin_f / 1e12, attn_f / 1e12, bb_bwd / 1e12
    printf "  state per GPU %.0f MiB -> spec state_mib (x PP) %.0f\n", mib(bb_state_gpu), mib(bb_state_gpu) * PP
    printf "  \"cost\": {\"fwd_ms\": %.1f, \"bwd_ms\": %.1f, \"act_mib\": %.0f, \"state_mib\": %.0f, \"out_mib\": %.0f}\n\n",
           ms(bb_fwd), ms(bb_bwd), mib(bb_act), mib(bb_state_gpu) * PP, mib(bb_out)
    printf "vit: fwd %.2f TFLOP (linear %.2f + attention %.2f), bwd %.2f TFLOP\n",
           vit_fwd / 1e12, vit_lin / 1e12, vit_attn / 1e12, vit_bwd / 1e12
    printf "  \"cost\": {\"fwd_ms\": %.1f, \"bwd_ms\": %.1f, \"act_mib\": %.0f, \"state_mib\": %.0f, \"out_mib\": %.0f}\n\n",
           ms(vit_fwd), ms(vit_bwd), mib(vit_act), mib(vit_state), mib(vit_out)
    printf "mmdit: params %.2fB (per-token %.2fB), fwd %.2f TFLOP (linear %.2f + attention %.2f), bwd %.2f TFLOP\n",
           g_total / 1e9, g_tok_p / 1e9, g_fwd / 1e12, g_lin / 1e12, g_attn / 1e12, g_bwd / 1e12
    printf "  \"cost\": {\"fwd_ms\": %.1f, \"bwd_ms\": %.1f, \"act_mib\": %.0f, \"state_mib\": %.0f, \"out_mib\": 0}\n",
           ms(g_fwd), ms(g_bwd), mib(g_act), mib(g_state)
}'
