// Whether a test program is built with AddressSanitizer (build-asan/, clang;
// gcc's -fsanitize=address too). Everything runs several times slower there
// (clang -O1, ASan, UBSan, libFuzzer's coverage hooks: the planner's sweeps
// ~15x), so a test whose answer depends on how much a wall-clock budget lets
// the code do gives it more time there.
#pragma once

namespace meshflow::test {

#if defined(__SANITIZE_ADDRESS__)  // gcc
#define MESHFLOW_TEST_ASAN 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define MESHFLOW_TEST_ASAN 1
#endif
#endif

#ifdef MESHFLOW_TEST_ASAN
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// A test's wall-clock budget of `seconds`: four times as long under the sanitizers.
constexpr double wallBudget(double seconds) { return kSanitized ? 4 * seconds : seconds; }

}  // namespace meshflow::test
