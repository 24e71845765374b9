// exp for the online softmax (Highway, per target): ExpNonPositive(df, x) for the arguments
// softmax produces, x = logit - running max <= 0, masked positions -inf.
//
// Include after "hwy/foreach_target.h" (or once, without it, for static dispatch), then
// "hwy/highway.h"; it lives in rpa::HWY_NAMESPACE.
//
// Why not hn::Exp: that one is correct on the whole f32 line, so it clamps its argument,
// converts with an overflow fix-up and scales by 2^n in two steps to reach the subnormals;
// ~30 vector instructions per call, 8-10% of a prefill and part of the 4-9% the softmax costs
// a decode. Softmax never needs any of that: its arguments are <= 0 and results below 2^-126
// (x < ln 2^-126) weigh nothing next to the row's maximum, whose weight is 1. So here:
//   n = round(x log2 e)                 a float add of 1.5 * 2^23 rounds and leaves n in the
//                                        low mantissa bits, which become the exponent of 2^n;
//   r = x - n ln2                       in two parts (Cody-Waite), |r| <= ln2 / 2;
//   exp(r) = 1 + r + r^2 P(r)           P of degree 5 (the Cephes expf coefficients);
//   exp(x) = 2^n exp(r), and 0 for x < ln 2^-126 (which includes -inf).
// 15 instructions. Error: within 2 ulp of exp(x) over [ln 2^-126, 0], 1.01 ulp at most as
// measured (tested exhaustively on every target, tests/kernels/test_softmax_exp.cc; the
// attention tests allow 16); exactly 1 at 0, exactly 0 at -inf, NaN stays NaN. Valid for x <= 88 (2^n must stay finite); larger x is outside its contract.

// Per-target include guard.
#if defined(RPA_KERNELS_SOFTMAX_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RPA_KERNELS_SOFTMAX_EXP_INL_H_
#undef RPA_KERNELS_SOFTMAX_EXP_INL_H_
#else
#define RPA_KERNELS_SOFTMAX_EXP_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> ExpNonPositive(DF df, hn::Vec<DF> x) {
  const hn::RebindToSigned<DF> di;
  // 1.5 * 2^23: t = x log2e + this lies in [2^23, 2^24) for |x log2e| < 2^22, where floats
  // are the integers; its bits are 0x4B400000 + round(x log2e).
  const auto round_bias = hn::Set(df, 12582912.0f);
  const auto t = hn::MulAdd(x, hn::Set(df, 1.44269504088896341f), round_bias);
  const auto n = hn::Sub(t, round_bias);  // exact
  // ln2 = 0.693359375 - 2.12194440e-4: the first part has 9 significant bits, so n times it
  // is exact for |n| < 2^15 and x - n * it loses nothing.
  auto r = hn::NegMulAdd(n, hn::Set(df, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(df, -2.12194440e-4f), r);
  auto p = hn::Set(df, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(df, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(df, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(df, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(df, 5.0000001201e-1f));
  const auto em1 = hn::MulAdd(p, hn::Mul(r, r), r);  // exp(r) - 1
  // 2^n: (0x4B400000 + n + 127) << 23 keeps n + 127 in the exponent field (the rest of
  // 0x4B400000 shifts out); a normal float for n >= -126, which the mask below guarantees.
  const auto pow2n =
      hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, t), hn::Set(di, 127))));
  const auto y = hn::MulAdd(em1, pow2n, pow2n);  // 2^n (exp(r) - 1) + 2^n
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(df, -87.3365447505531f)), y);  // ln 2^-126
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#endif  // RPA_KERNELS_SOFTMAX_EXP_INL_H_ per-target guard
