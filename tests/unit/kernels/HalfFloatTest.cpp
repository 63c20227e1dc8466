// f16 and bf16 on the host: the conversions' rounding (to nearest, ties to
// even), f16's overflow and subnormals, NaN, and half-precision tensors.
#include <bit>
#include <cmath>

#include "KernelTestSupport.h"
#include "runtime/HalfFloat.h"

using namespace kernel_test;
using meshflow::ir::DType;
using meshflow::runtime::BFloat16;
using meshflow::runtime::fromBFloat16;
using meshflow::runtime::fromHalf;
using meshflow::runtime::Half;
using meshflow::runtime::toBFloat16;
using meshflow::runtime::toHalf;

namespace {

std::uint16_t halfBits(float v) { return toHalf(v).bits; }
std::uint16_t bf16Bits(float v) { return toBFloat16(v).bits; }
float f32(std::uint32_t bits) { return std::bit_cast<float>(bits); }

}  // namespace

TEST_CASE("f32 to bf16 rounds to nearest, ties to even", "[half]") {
  CHECK(bf16Bits(1.0f) == 0x3f80);
  CHECK(bf16Bits(-2.0f) == 0xc000);
  // 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7 (odd): down.
  CHECK(bf16Bits(1.0f + 0x1.0p-8f) == 0x3f80);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  CHECK(bf16Bits(1.0f + 3 * 0x1.0p-8f) == 0x3f82);
  // Just past the halfway point rounds up.
  CHECK(bf16Bits(f32(0x3f808001)) == 0x3f81);
  CHECK(bf16Bits(f32(0x3f807fff)) == 0x3f80);
  // FLT_MAX is past bf16's largest finite value plus half a unit: infinity.
  CHECK(bf16Bits(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(bf16Bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(fromBFloat16(BFloat16{0x3f81}) == 1.0f + 0x1.0p-7f);
}

TEST_CASE("bf16 keeps NaN a NaN, whatever its payload", "[half]") {
  // A payload only in the low 16 bits would round into the infinity's bits.
  for (std::uint32_t bits : {0x7f800001u, 0x7fc00000u, 0xffffffffu, 0x7f80ffffu}) {
    INFO(std::hex << bits);
    BFloat16 b = toBFloat16(f32(bits));
    CHECK((b.bits & 0x7f80) == 0x7f80);
    CHECK((b.bits & 0x007f) != 0);
    CHECK(std::isnan(fromBFloat16(b)));
  }
}

TEST_CASE("f32 to f16 rounds to nearest even and overflows to infinity", "[half]") {
  CHECK(halfBits(1.0f) == 0x3c00);
  CHECK(halfBits(-0.0f) == 0x8000);
  CHECK(halfBits(1.0f + 0x1.0p-11f) == 0x3c00);      // tie, to the even 1
  CHECK(halfBits(1.0f + 3 * 0x1.0p-11f) == 0x3c02);  // tie, to the even 1 + 2^-9
  CHECK(halfBits(1.0f + 0x1.8p-11f) == 0x3c01);      // past the tie
  CHECK(halfBits(65504.0f) == 0x7bff);               // the largest finite half
  CHECK(halfBits(65519.0f) == 0x7bff);               // below the halfway point to 2^16
  CHECK(halfBits(65520.0f) == 0x7c00);               // the tie rounds to even: infinity
  CHECK(halfBits(1e6f) == 0x7c00);
  CHECK(halfBits(-1e6f) == 0xfc00);
  CHECK(halfBits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(fromHalf(Half{0x7bff}) == 65504.0f);
  CHECK(std::isinf(fromHalf(Half{0xfc00})));
}

TEST_CASE("f16 subnormals round to nearest even", "[half]") {
  CHECK(halfBits(0x1.0p-24f) == 0x0001);         // the smallest subnormal
  CHECK(halfBits(0x1.0p-25f) == 0x0000);         // half of it: a tie, to the even 0
  CHECK(halfBits(0x1.8p-25f) == 0x0001);         // past the tie
  CHECK(halfBits(3 * 0x1.0p-25f) == 0x0002);     // 1.5 units: a tie, to the even 2
  CHECK(halfBits(1023 * 0x1.0p-24f) == 0x03ff);  // the largest subnormal
  CHECK(halfBits(0x1.0p-14f) == 0x0400);         // the smallest normal
  CHECK(halfBits(0x1.ff8p-15f) == 0x03ff);       // 1023 units: the largest subnormal again
  CHECK(halfBits(0x1.ffcp-15f) == 0x0400);  // 1023.5 units: a tie, up to the even smallest normal
  CHECK(halfBits(0x1.ffap-15f) == 0x03ff);  // 1023.25 units: down
  CHECK(halfBits(-0x1.0p-30f) == 0x8000);   // underflows to a signed zero
  CHECK(fromHalf(Half{0x0001}) == 0x1.0p-24f);
  CHECK(fromHalf(Half{0x83ff}) == -1023 * 0x1.0p-24f);
  CHECK(std::isnan(fromHalf(toHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("every half value survives a round trip through f32", "[half]") {
  int wrongHalf = 0, wrongBf16 = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    auto b = static_cast<std::uint16_t>(bits);
    float h = fromHalf(Half{b});
    if (!std::isnan(h) && toHalf(h).bits != b) ++wrongHalf;
    float f = fromBFloat16(BFloat16{b});
    if (!std::isnan(f) && toBFloat16(f).bits != b) ++wrongBf16;
  }
  CHECK(wrongHalf == 0);
  CHECK(wrongBf16 == 0);
}

TEST_CASE("half tensors store 2 bytes an element and convert", "[half][tensor]") {
  Tensor x = Tensor::fromF32({2, 2}, {1.0f, 1.0f + 0x1.0p-8f, 65520.0f, -3.0f});
  Tensor b = x.castTo(DType::BF16);
  CHECK(b.typeText() == "bf16[2, 2]");
  CHECK(b.bytes() == 8);
  CHECK(b.bf16()[1].bits == 0x3f80);
  Tensor h = x.castTo(DType::F16);
  CHECK(h.f16()[2].bits == 0x7c00);
  CHECK(h.toF32().f32()[3] == -3.0f);
  CHECK_THROWS_AS(h.f32(), std::logic_error);
  CHECK_THROWS_AS(Tensor::fromI32({1}, {1}).castTo(DType::F16), std::logic_error);
  // bf16 → f16 goes through f32: 1 + 2^-8 is exact in f16 but was rounded away in bf16.
  CHECK(b.castTo(DType::F16).f16()[1].bits == 0x3c00);
  CHECK(Tensor(DType::F16, {3}).toF32().bitEqual(Tensor::zeros({3})));
  CHECK(Tensor::placeholder(DType::BF16, {4}).isPlaceholder());
}

TEST_CASE("half tensors are copy-on-write like f32 ones", "[half][tensor]") {
  Tensor a = Tensor::full({4}, 2.0f).castTo(DType::BF16);
  Tensor b = a;
  CHECK(b.sharesStorage());
  b.bf16()[0] = toBFloat16(5.0f);
  CHECK_FALSE(a.sharesStorage());
  CHECK(fromBFloat16(a.bf16()[0]) == 2.0f);
  CHECK(fromBFloat16(b.bf16()[0]) == 5.0f);
  Tensor r = a.reshaped({2, 2});
  CHECK(r.sharesStorage());
  CHECK(r.typeText() == "bf16[2, 2]");
  CHECK(r.bitEqual(a.reshaped({2, 2})));
}

TEST_CASE("span conversions equal the scalar ones, vectorised or not", "[half]") {
  // Spans convert eight at a time where the CPU can (F16C); every element,
  // the tail's included, must match toHalf / fromHalf bit for bit.
  std::vector<float> values;
  for (std::uint32_t bits = 0x33000000u; bits < 0x47800000u; bits += 0x00012345u) {
    values.push_back(f32(bits));
    values.push_back(-f32(bits));
  }
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(65520.0f);
  values.push_back(0x1.0p-25f);  // a tie to 0
  std::vector<Half> halves(values.size());
  meshflow::runtime::narrow(values, halves);
  std::vector<float> back(values.size());
  meshflow::runtime::widen(halves, back);
  int wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    wrong += halves[i].bits != toHalf(values[i]).bits;
    wrong +=
        std::bit_cast<std::uint32_t>(back[i]) != std::bit_cast<std::uint32_t>(fromHalf(halves[i]));
  }
  CHECK(values.size() % 8 != 0);  // a tail the vector loop leaves
  CHECK(wrong == 0);
}
