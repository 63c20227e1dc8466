// Exact arithmetic under the schedule figures.
#include <catch2/catch.hpp>

#include "passes/schedules/Rational.h"

using meshflow::passes::parseRational;
using meshflow::passes::Rational;

TEST_CASE("rationals reduce and compare exactly", "[schedules][rational]") {
  CHECK(Rational(6, 4) == Rational(3, 2));
  CHECK(Rational(3, -6) == Rational(-1, 2));
  CHECK(Rational(1, 3) + Rational(1, 6) == Rational(1, 2));
  CHECK(Rational(1, 3) * 3 == 1);
  CHECK(Rational(3, 11) < Rational(3, 10));
  CHECK(Rational(57, 2).toString() == "57/2");
  CHECK(Rational(-4).toString() == "-4");
  CHECK(gcd(Rational(3, 2), Rational(1)) == Rational(1, 2));
  CHECK(gcd(Rational(0), Rational(2, 3)) == Rational(2, 3));
}

TEST_CASE("rationals parse from integers, decimals and fractions", "[schedules][rational]") {
  CHECK(parseRational("3") == Rational(3));
  CHECK(parseRational("1.25") == Rational(5, 4));
  CHECK(parseRational(".5") == Rational(1, 2));
  CHECK(parseRational("-0.5") == Rational(-1, 2));
  CHECK(parseRational("5/4") == Rational(5, 4));
  for (const char* bad : {"", "x", "1/0", "1.", "1.2.3", "1/-2", "2e3"}) {
    INFO(bad);
    CHECK_FALSE(parseRational(bad).has_value());
  }
}
