# Doxygen INPUT_FILTER for procgroup's public headers (docs/Doxyfile.in). The headers use
# plain comments, which Doxygen ignores; this turns them into documentation comments on
# the fly, so the headers stay plain C and the reference still renders:
#   "/* name.h — what it is" (first line)  ->  @file, with "what it is" as the brief
#   "/* text" before a declaration        ->  "/** text"   (rulers "/* ---- x ---- */" stay)
#   "decl;  /* text */", "VALUE, /* text */" ->  "/**< text */" (documents that member)
#   "// text" and "code;  // text" (C++)    ->  "/// text" and "///< text"
#   an example indented 3+ columns after an empty comment line -> @code ... @endcode
# POSIX awk only (mawk is enough).
function flush_code() {
  if (in_code) print code_marker " @endcode"
  in_code = 0
}
# Handles one line of comment text: marker is " *" or "///", text what follows it.
function comment_line(marker, text) {
  if (in_code && text !~ /^   /) flush_code()
  if (!in_code && prev_blank && text ~ /^   [^ ]/) {
    in_code = 1
    code_marker = marker
    print marker " @code"
  }
  prev_blank = (text ~ /^[ \t]*$/)
  print marker text
}
{
  line = $0
  if (NR == 1 && line ~ /^(\/\*|\/\/) [a-z_.]+\.h(pp)? — /) {
    slash = (substr(line, 1, 2) == "//")
    rest = substr(line, 4)
    name = substr(rest, 1, index(rest, " ") - 1)
    brief = substr(rest, index(rest, "—") + length("—") + 1)
    marker = slash ? "///" : " *"
    print (slash ? "/// @file " : "/** @file ") name
    print marker " @brief " brief
    in_block = !slash
    prev_blank = 1
    next
  }
  if (in_block) {
    if (index(line, "*/") > 0) { flush_code(); in_block = 0; print line; next }
    if (line ~ /^ \*/) { comment_line(" *", substr(line, 3)); next }
    print line
    next
  }
  if (line ~ /^[ \t]*\/\/($| )/) {
    i = index(line, "//")
    comment_line(substr(line, 1, i - 1) "///", substr(line, i + 2))
    next
  }
  flush_code()
  prev_blank = 1
  if (line ~ /^[ \t]*\/\* ----/) { print line; next }
  if (line ~ /^[ \t]*\/\*/) {
    sub(/\/\*/, "/**", line)
    if (index(line, "*/") == 0) in_block = 1
    print line
    next
  }
  if (line ~ /[;,{][ \t]*\/\* /) sub(/\/\* /, "/**< ", line)
  if (line ~ /[;,{)][ \t]*\/\/ /) sub(/\/\/ /, "///< ", line)
  if (index(line, "/*") > 0 && index(line, "*/") == 0) in_block = 1
  print line
}
END { flush_code() }
