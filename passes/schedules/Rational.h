// Exact rational numbers for schedule timing.
//
// Schedule figures are compared against closed forms such as a makespan of
// m(t_F + t_B) + (p − 1)(t_F + t_B)/v; with doubles those comparisons would hold
// only up to rounding, so timing works on reduced fractions of 64-bit integers
// (products are formed in 128 bits before reducing).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshflow::passes {

class Rational {
 public:
  constexpr Rational() = default;
  constexpr Rational(int64_t value) : num_(value) {}  // NOLINT: integers are rationals
  /// num/den reduced; den must not be 0.
  Rational(int64_t num, int64_t den);

  int64_t num() const { return num_; }
  int64_t den() const { return den_; }
  bool isInteger() const { return den_ == 1; }
  double toDouble() const { return static_cast<double>(num_) / static_cast<double>(den_); }
  /// "3", "-3" or "57/2".
  std::string toString() const;

  friend Rational operator+(Rational a, Rational b);
  friend Rational operator-(Rational a, Rational b);
  friend Rational operator*(Rational a, Rational b);
  friend Rational operator/(Rational a, Rational b);
  Rational& operator+=(Rational other) { return *this = *this + other; }
  Rational& operator-=(Rational other) { return *this = *this - other; }

  friend Rational gcd(Rational a, Rational b);
  friend bool operator==(Rational a, Rational b) = default;
  friend std::strong_ordering operator<=>(Rational a, Rational b);

 private:
  // Reduces a fraction given in 128 bits; throws when it does not fit back in 64.
  static Rational reduce(__int128 num, __int128 den);

  int64_t num_ = 0;
  int64_t den_ = 1;
};

Rational max(Rational a, Rational b);
/// The largest rational g such that a/g and b/g are both integers (gcd(0, b) = b).
Rational gcd(Rational a, Rational b);
/// Parses "3", "1.25" or "5/4"; nullopt when the text is not such a number.
std::optional<Rational> parseRational(std::string_view text);

}  // namespace meshflow::passes
