#include "passes/schedules/Rational.h"

#include <charconv>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace meshflow::passes {
namespace {

using Wide = __int128;

Wide wideGcd(Wide a, Wide b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    Wide t = a % b;
    a = b;
    b = t;
  }
  return a;
}

std::optional<int64_t> parseInteger(std::string_view text);

}  // namespace

// The sign lives in the numerator; the denominator is always positive.
Rational Rational::reduce(Wide num, Wide den) {
  if (den == 0) throw std::domain_error("rational with zero denominator");
  if (den < 0) {
    num = -num;
    den = -den;
  }
  Wide g = wideGcd(num, den);
  if (g > 1) {
    num /= g;
    den /= g;
  }
  constexpr Wide kMax = std::numeric_limits<int64_t>::max();
  if (num > kMax || num < -kMax || den > kMax) {
    throw std::overflow_error("rational arithmetic overflowed 64 bits");
  }
  Rational result;
  result.num_ = static_cast<int64_t>(num);
  result.den_ = static_cast<int64_t>(den);
  return result;
}

namespace {

std::optional<int64_t> parseInteger(std::string_view text) {
  int64_t value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<Rational> parseDecimal(std::string_view text) {
  size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view fraction = text.substr(dot + 1);
  if (fraction.empty() || fraction.size() > 18 || fraction[0] == '-' || fraction[0] == '+') {
    return std::nullopt;
  }
  std::optional<int64_t> wholeValue =
      whole.empty() ? std::optional<int64_t>(0) : parseInteger(whole);
  std::optional<int64_t> fractionValue = parseInteger(fraction);
  if (!wholeValue || !fractionValue) return std::nullopt;
  int64_t scale = 1;
  for (size_t i = 0; i < fraction.size(); ++i) scale *= 10;
  bool negative = !whole.empty() && whole[0] == '-';
  Rational magnitude =
      Rational(negative ? -*wholeValue : *wholeValue) + Rational(*fractionValue, scale);
  return negative ? Rational(0) - magnitude : magnitude;
}

}  // namespace

Rational::Rational(int64_t num, int64_t den) { *this = reduce(num, den); }

std::string Rational::toString() const {
  if (den_ == 1) return std::to_string(num_);
  return std::to_string(num_) + "/" + std::to_string(den_);
}

Rational operator+(Rational a, Rational b) {
  return Rational::reduce(Wide(a.num_) * b.den_ + Wide(b.num_) * a.den_, Wide(a.den_) * b.den_);
}

Rational operator-(Rational a, Rational b) {
  return Rational::reduce(Wide(a.num_) * b.den_ - Wide(b.num_) * a.den_, Wide(a.den_) * b.den_);
}

Rational operator*(Rational a, Rational b) {
  return Rational::reduce(Wide(a.num_) * b.num_, Wide(a.den_) * b.den_);
}

Rational operator/(Rational a, Rational b) {
  return Rational::reduce(Wide(a.num_) * b.den_, Wide(a.den_) * b.num_);
}

std::strong_ordering operator<=>(Rational a, Rational b) {
  return Wide(a.num_) * b.den_ <=> Wide(b.num_) * a.den_;
}

Rational max(Rational a, Rational b) { return a < b ? b : a; }

Rational gcd(Rational a, Rational b) {
  // gcd(a/b, c/d) = gcd(a·d, c·b) / (b·d), which reduce() brings to lowest terms.
  Wide top = wideGcd(Wide(a.num_) * b.den_, Wide(b.num_) * a.den_);
  return Rational::reduce(top, Wide(a.den_) * b.den_);
}

std::optional<Rational> parseRational(std::string_view text) {
  size_t slash = text.find('/');
  if (slash != std::string_view::npos) {
    std::optional<int64_t> num = parseInteger(text.substr(0, slash));
    std::optional<int64_t> den = parseInteger(text.substr(slash + 1));
    if (!num || !den || *den <= 0) return std::nullopt;
    return Rational(*num, *den);
  }
  if (text.find('.') != std::string_view::npos) return parseDecimal(text);
  std::optional<int64_t> value = parseInteger(text);
  if (!value) return std::nullopt;
  return Rational(*value);
}

}  // namespace meshflow::passes
