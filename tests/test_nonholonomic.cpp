// Placeholder, replaced below.
#include <gtest/gtest.h>
TEST(Nonholonomic, Placeholder) {}
