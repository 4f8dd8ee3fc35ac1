// procgroup.h and procgroup_backend.h each carry the common types (status codes, dtypes,
// reduce ops, devices, ops, pg_buffer_t) inside #ifndef PG_COMMON_TYPES_V1, so that either
// header works alone and both work together. That only holds if the two copies are
// byte-identical; this test reads both files from the source tree and compares them.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace {

// The text from "#ifndef PG_COMMON_TYPES_V1" through its matching #endif line, following
// nested conditionals; nullopt if the block is missing or unterminated.
std::optional<std::string> common_block(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::string block;
  int depth = 0;
  bool inside = false;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    const std::string directive = start == std::string::npos ? "" : line.substr(start);
    if (!inside) {
      if (directive.rfind("#ifndef PG_COMMON_TYPES_V1", 0) == 0) {
        inside = true;
        depth = 1;
        block = line + "\n";
      }
      continue;
    }
    block += line + "\n";
    if (directive.rfind("#if", 0) == 0) {
      ++depth;
    } else if (directive.rfind("#endif", 0) == 0 && --depth == 0) {
      return block;
    }
  }
  return std::nullopt;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(AbiCommonTypes, ExtractionFollowsNestingAndNeedsTheBlock) {
  const std::string text =
      "x\n#ifndef PG_COMMON_TYPES_V1\na\n#if B\nb\n#endif\nc\n#endif /* V1 */\nafter\n";
  EXPECT_EQ(common_block(text),
            "#ifndef PG_COMMON_TYPES_V1\na\n#if B\nb\n#endif\nc\n#endif /* V1 */\n");
  EXPECT_EQ(common_block("#ifndef OTHER\n#endif\n"), std::nullopt);
  EXPECT_EQ(common_block("#ifndef PG_COMMON_TYPES_V1\nno end\n"), std::nullopt);
}

TEST(AbiCommonTypes, BlockIsByteIdenticalInBothHeaders) {
  const std::string user = read_file(PROCGROUP_USER_HEADER);
  const std::string backend = read_file(PROCGROUP_BACKEND_HEADER);
  ASSERT_FALSE(user.empty()) << PROCGROUP_USER_HEADER;
  ASSERT_FALSE(backend.empty()) << PROCGROUP_BACKEND_HEADER;
  const std::optional<std::string> user_block = common_block(user);
  const std::optional<std::string> backend_block = common_block(backend);
  ASSERT_TRUE(user_block.has_value()) << "no PG_COMMON_TYPES_V1 block in procgroup.h";
  ASSERT_TRUE(backend_block.has_value()) << "no PG_COMMON_TYPES_V1 block in procgroup_backend.h";
  EXPECT_GT(user_block->size(), 1000u) << "the block looks truncated";
  EXPECT_EQ(*user_block, *backend_block)
      << "procgroup.h and procgroup_backend.h differ inside #ifndef PG_COMMON_TYPES_V1; "
         "edit both copies together";
}

}  // namespace
