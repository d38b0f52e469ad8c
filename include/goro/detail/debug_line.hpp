// DWARF readers for the goroutine dump's file:line and inlined frames
// (debug_frames.hpp does the lookup), DWARF 4 and 5.
//
// Own, small readers (no libdw, no libbacktrace): the unit headers, the
// abbreviations, every attribute form (to skip what is not needed), range
// lists (.debug_ranges, .debug_rnglists, .debug_addr for the DWARF 5
// indexed forms clang emits) and the line program's standard, extended and
// special opcodes. Compressed sections (SHF_COMPRESSED, -gz) and separate
// debug files are not read: those objects get no file:line. Every read is
// bounds-checked; malformed data ends the lookup with no answer.
//
// Included only by debug_frames.hpp and symbolize.hpp, which are only in
// the runtime's part (dump.hpp's GORO_COMPILE_RUNTIME block): under
// separate compilation only the implementation file compiles this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace goro::detail {

struct dwarf_span {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
};

// The sections an object's file has, pointing into its mapping.
struct dwarf_sections {
  dwarf_span info, abbrev, line, line_str, str, str_offsets, addr, ranges, rnglists;
};

// The member of dwarf_sections that the section `name` fills (the same
// names in ELF and PE files), or nullptr for a section not read here.
inline dwarf_span dwarf_sections::*dwarf_section_named(const char* name) {
  static constexpr struct {
    const char* name;
    dwarf_span dwarf_sections::*span;
  } wanted[] = {{".debug_info", &dwarf_sections::info},        {".debug_abbrev", &dwarf_sections::abbrev},
                {".debug_line", &dwarf_sections::line},        {".debug_line_str", &dwarf_sections::line_str},
                {".debug_str", &dwarf_sections::str},          {".debug_str_offsets", &dwarf_sections::str_offsets},
                {".debug_addr", &dwarf_sections::addr},        {".debug_ranges", &dwarf_sections::ranges},
                {".debug_rnglists", &dwarf_sections::rnglists}};
  for (const auto& w : wanted)
    if (std::strcmp(w.name, name) == 0) return w.span;
  return nullptr;
}

// A bounds-checked little-endian reader (every target goro supports is
// little-endian; the symbolizer skips other files).
struct dwarf_cursor {
  const unsigned char* p = nullptr;
  const unsigned char* end = nullptr;
  bool ok = true;

  dwarf_cursor() = default;
  dwarf_cursor(dwarf_span s, std::uint64_t off) : p(s.data), end(s.data + s.size) {
    if (off > s.size)
      fail();
    else
      p += off;
  }
  void fail() {
    ok = false;
    p = end;
  }
  bool need(std::uint64_t n) {
    if (ok && n <= static_cast<std::uint64_t>(end - p)) return true;
    fail();
    return false;
  }
  void skip(std::uint64_t n) {
    if (need(n)) p += n;
  }
  std::uint64_t fixed(unsigned n) {
    if (!need(n)) return 0;
    std::uint64_t v = 0;
    for (unsigned i = 0; i < n && i < 8; ++i) v |= std::uint64_t{p[i]} << (8 * i);
    p += n;
    return v;
  }
  std::uint64_t uleb() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; need(1);) {
      const unsigned char b = *p++;
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    return v;
  }
  std::int64_t sleb() {
    std::uint64_t v = 0;
    unsigned shift = 0;
    unsigned char b = 0;
    do {
      if (!need(1)) return 0;
      b = *p++;
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~std::uint64_t{0} << shift;
    return static_cast<std::int64_t>(v);
  }
  const char* cstr() {
    const unsigned char* s = p;
    while (p < end && *p) ++p;
    if (!need(1)) return nullptr;
    ++p;
    return reinterpret_cast<const char*>(s);
  }
  // A unit's initial length: 32-bit DWARF, or 0xffffffff then 64-bit.
  std::uint64_t unit_length(unsigned& offset_size) {
    std::uint64_t n = fixed(4);
    offset_size = 4;
    if (n == 0xffffffffu) {
      n = fixed(8);
      offset_size = 8;
    }
    return n;
  }
};

// The answer: a path ("/dir/file.cpp") and a line; line 0 when unknown.
// One function's part of the code at a pc (debug_frames.hpp): the
// function's name and the line in it.
struct source_frame {
  std::string name;  // demangled; may be empty for the function the code is in (the symbol table names it)
  std::string file;  // empty when unknown
  unsigned line = 0;
  bool scoped = false;  // from debug information with scopes and types (full -g), which names inlined calls
};

namespace dwarf {

// The DWARF constants used here (DWARF 5, section 7).
enum : unsigned {
  tag_compile_unit = 0x11,
  tag_partial_unit = 0x3c,
  tag_subprogram = 0x2e,
  tag_inlined_subroutine = 0x1d,
  tag_enumeration_type = 0x04,
  tag_class_type = 0x02,
  tag_structure_type = 0x13,
  tag_union_type = 0x17,
  tag_namespace = 0x39,
  tag_base_type = 0x24,
  at_sibling = 0x01,
  at_name = 0x03,
  at_abstract_origin = 0x31,
  at_specification = 0x47,
  at_linkage_name = 0x6e,
  at_str_offsets_base = 0x72,
  at_mips_linkage_name = 0x2007,
  at_stmt_list = 0x10,
  at_low_pc = 0x11,
  at_high_pc = 0x12,
  at_comp_dir = 0x1b,
  at_ranges = 0x55,
  at_call_file = 0x58,
  at_call_line = 0x59,
  at_addr_base = 0x73,
  at_rnglists_base = 0x74,
  form_addr = 0x01,
  form_block2 = 0x03,
  form_block4 = 0x04,
  form_data2 = 0x05,
  form_data4 = 0x06,
  form_data8 = 0x07,
  form_string = 0x08,
  form_block = 0x09,
  form_block1 = 0x0a,
  form_data1 = 0x0b,
  form_flag = 0x0c,
  form_sdata = 0x0d,
  form_strp = 0x0e,
  form_udata = 0x0f,
  form_ref_addr = 0x10,
  form_ref1 = 0x11,
  form_ref2 = 0x12,
  form_ref4 = 0x13,
  form_ref8 = 0x14,
  form_ref_udata = 0x15,
  form_indirect = 0x16,
  form_sec_offset = 0x17,
  form_exprloc = 0x18,
  form_flag_present = 0x19,
  form_strx = 0x1a,
  form_addrx = 0x1b,
  form_ref_sup4 = 0x1c,
  form_strp_sup = 0x1d,
  form_data16 = 0x1e,
  form_line_strp = 0x1f,
  form_ref_sig8 = 0x20,
  form_implicit_const = 0x21,
  form_loclistx = 0x22,
  form_rnglistx = 0x23,
  form_ref_sup8 = 0x24,
  form_strx1 = 0x25,
  form_strx4 = 0x28,
  form_addrx1 = 0x29,
  form_addrx4 = 0x2c,
};

// One unit of .debug_info, as far as the lookup needs it.
struct unit {
  const dwarf_sections* s = nullptr;
  // In .debug_info: the unit header, its first entry, and past its last.
  std::uint64_t offset = 0, first = 0, end = 0;
  unsigned version = 0, offset_size = 4, addr_size = 8;
  std::uint64_t addr_base = 0, rnglists_base = 0, str_offsets_base = 0, base_pc = 0;
  struct abbrev {
    std::uint64_t code = 0;
    unsigned tag = 0;
    bool children = false;
    const unsigned char* specs = nullptr;  // (name, form[, implicit const]) pairs
  };
  std::vector<abbrev> abbrevs;
};

// An attribute's value: a number (constant, address, index, offset) or a
// string; `indexed` for addrx / rnglistx forms, `str_index` for strx forms
// (resolved by the caller: string_at).
struct value {
  std::uint64_t u = 0;
  const char* str = nullptr;
  bool indexed = false;
  bool str_index = false;
  bool constant = false;  // a constant class form (high_pc as a length)
};

inline const char* section_string(dwarf_span sec, std::uint64_t off) {
  dwarf_cursor c(sec, off);
  return c.ok ? c.cstr() : nullptr;
}

// Reads (or skips) one attribute of form `form`.
inline void read_form(dwarf_cursor& c, const unit& u, std::uint64_t form, std::int64_t implicit, value& v) {
  v = value{};
  switch (form) {
    case form_addr:
      v.u = c.fixed(u.addr_size);
      return;
    case form_data1:
    case form_ref1:
    case form_flag:
    case form_strx1:
    case form_addrx1:
      v.u = c.fixed(1);
      break;
    case form_data2:
    case form_ref2:
    case form_strx1 + 1:
    case form_addrx1 + 1:
      v.u = c.fixed(2);
      break;
    case form_strx1 + 2:
    case form_addrx1 + 2:
      v.u = c.fixed(3);
      break;
    case form_data4:
    case form_ref4:
    case form_ref_sup4:
    case form_strx4:
    case form_addrx4:
      v.u = c.fixed(4);
      break;
    case form_data8:
    case form_ref8:
    case form_ref_sig8:
    case form_ref_sup8:
      v.u = c.fixed(8);
      break;
    case form_data16:
      c.skip(16);
      break;
    case form_sdata:
      v.u = static_cast<std::uint64_t>(c.sleb());
      break;
    case form_udata:
    case form_ref_udata:
    case form_strx:
    case form_addrx:
    case form_loclistx:
    case form_rnglistx:
      v.u = c.uleb();
      break;
    case form_string:
      v.str = c.cstr();
      return;
    case form_strp:
      v.str = section_string(u.s->str, c.fixed(u.offset_size));
      return;
    case form_line_strp:
      v.str = section_string(u.s->line_str, c.fixed(u.offset_size));
      return;
    case form_ref_addr:
    case form_sec_offset:
    case form_strp_sup:
      v.u = c.fixed(u.offset_size);
      return;
    case form_block1:
      c.skip(c.fixed(1));
      return;
    case form_block2:
      c.skip(c.fixed(2));
      return;
    case form_block4:
      c.skip(c.fixed(4));
      return;
    case form_block:
    case form_exprloc:
      c.skip(c.uleb());
      return;
    case form_flag_present:
      v.u = 1;
      return;
    case form_implicit_const:
      v.u = static_cast<std::uint64_t>(implicit);
      v.constant = true;
      return;
    case form_indirect:
      read_form(c, u, c.uleb(), implicit, v);
      return;
    default:
      c.fail();
      return;  // a form this reader does not know: stop
  }
  v.indexed = form == form_addrx || (form >= form_addrx1 && form <= form_addrx4) || form == form_rnglistx;
  v.str_index = form == form_strx || (form >= form_strx1 && form <= form_strx4);
  v.constant = !v.indexed && form != form_ref1 && form != form_ref2 && form != form_ref4 && form != form_ref8 &&
               form != form_ref_udata && form != form_ref_sig8 && form != form_ref_sup4 && form != form_ref_sup8;
}

// A string attribute's text: in place, or at index v.u of the unit's
// .debug_str_offsets table (strx forms). nullptr when absent.
inline const char* string_at(const unit& u, const value& v) {
  if (!v.str_index) return v.str;
  dwarf_cursor c(u.s->str_offsets, u.str_offsets_base + v.u * u.offset_size);
  const std::uint64_t off = c.fixed(u.offset_size);
  return c.ok ? section_string(u.s->str, off) : nullptr;
}

// The address at index `i` of the unit's .debug_addr table.
inline std::uint64_t indexed_address(const unit& u, std::uint64_t i) {
  dwarf_cursor c(u.s->addr, u.addr_base + i * u.addr_size);
  return c.fixed(u.addr_size);
}

// Whether the range list at `at` (DW_AT_ranges) holds pc.
inline bool ranges_hold(const unit& u, const value& at, std::uint64_t pc) {
  if (u.version < 5) {  // .debug_ranges: address pairs, relative to a base
    dwarf_cursor c(u.s->ranges, at.u);
    const std::uint64_t all = u.addr_size == 8 ? ~std::uint64_t{0} : 0xffffffffu;
    std::uint64_t base = u.base_pc;
    while (c.ok) {
      const std::uint64_t a = c.fixed(u.addr_size), b = c.fixed(u.addr_size);
      if (a == 0 && b == 0) break;
      if (a == all)
        base = b;
      else if (pc >= base + a && pc < base + b)
        return true;
    }
    return false;
  }
  std::uint64_t off = at.u;
  if (at.indexed) {  // rnglistx: an offset from the unit's table of offsets
    dwarf_cursor t(u.s->rnglists, u.rnglists_base + at.u * u.offset_size);
    off = u.rnglists_base + t.fixed(u.offset_size);
  }
  dwarf_cursor c(u.s->rnglists, off);
  std::uint64_t base = u.base_pc;
  while (c.ok) {
    std::uint64_t lo = 0, hi = 0;
    switch (c.fixed(1)) {  // DW_RLE_*
      case 0:
        return false;  // end_of_list
      case 1:
        base = indexed_address(u, c.uleb());
        continue;  // base_addressx
      case 2:
        lo = indexed_address(u, c.uleb());
        hi = indexed_address(u, c.uleb());
        break;  // startx_endx
      case 3:
        lo = indexed_address(u, c.uleb());
        hi = lo + c.uleb();
        break;  // startx_length
      case 4:
        lo = base + c.uleb();
        hi = base + c.uleb();
        break;  // offset_pair
      case 5:
        base = c.fixed(u.addr_size);
        continue;  // base_address
      case 6:
        lo = c.fixed(u.addr_size);
        hi = c.fixed(u.addr_size);
        break;  // start_end
      case 7:
        lo = c.fixed(u.addr_size);
        hi = lo + c.uleb();
        break;  // start_length
      default:
        return false;
    }
    if (pc >= lo && pc < hi) return true;
  }
  return false;
}

// One entry's attributes that matter here.
struct entry {
  const unit::abbrev* ab = nullptr;
  value low, high, ranges, stmt_list, call_file, call_line, sibling, addr_base, rnglists_base, str_offsets_base;
  value comp_dir, name, linkage_name;
  // DW_AT_abstract_origin / DW_AT_specification: the entry referred to, as
  // an offset in .debug_info (0: none, or one this reader does not follow).
  std::uint64_t origin = 0;
  bool has_low = false, has_high = false, has_ranges = false, has_stmt = false, has_call = false, has_sibling = false;
};

// Reads the entry at c (its abbreviation code first); false at a null
// entry (the end of a list of children) or on malformed data.
inline bool read_entry(dwarf_cursor& c, const unit& u, entry& e) {
  const std::uint64_t code = c.uleb();
  if (code == 0 || !c.ok) return false;
  e = entry{};
  if (code <= u.abbrevs.size() && u.abbrevs[code - 1].code == code) e.ab = &u.abbrevs[code - 1];
  for (std::size_t i = 0; !e.ab && i < u.abbrevs.size(); ++i)
    if (u.abbrevs[i].code == code) e.ab = &u.abbrevs[i];
  if (!e.ab) {
    c.fail();
    return false;
  }
  dwarf_cursor spec(u.s->abbrev, static_cast<std::uint64_t>(e.ab->specs - u.s->abbrev.data));
  for (;;) {
    const std::uint64_t name = spec.uleb(), form = spec.uleb();
    if ((name == 0 && form == 0) || !spec.ok || !c.ok) break;
    const std::int64_t implicit = form == form_implicit_const ? spec.sleb() : 0;
    value v;
    read_form(c, u, form, implicit, v);
    switch (name) {
      case at_low_pc:
        e.low = v, e.has_low = true;
        break;
      case at_high_pc:
        e.high = v, e.has_high = true;
        break;
      case at_ranges:
        e.ranges = v, e.has_ranges = true;
        break;
      case at_stmt_list:
        e.stmt_list = v, e.has_stmt = true;
        break;
      case at_call_file:
        e.call_file = v, e.has_call = true;
        break;
      case at_call_line:
        e.call_line = v;
        break;
      case at_sibling:
        e.sibling = v, e.has_sibling = form != form_ref_addr && form != form_ref_sig8;
        break;
      case at_comp_dir:
        e.comp_dir = v;
        break;
      case at_name:
        e.name = v;
        break;
      case at_linkage_name:
      case at_mips_linkage_name:
        e.linkage_name = v;
        break;
      case at_abstract_origin:
      case at_specification:
        // Unit-relative forms, or DW_FORM_ref_addr (an offset in .debug_info).
        if (form == form_ref_addr)
          e.origin = v.u;
        else if (form >= form_ref1 && form <= form_ref_udata)
          e.origin = u.offset + v.u;
        break;
      case at_str_offsets_base:
        e.str_offsets_base = v;
        break;
      case at_addr_base:
        e.addr_base = v;
        break;
      case at_rnglists_base:
        e.rnglists_base = v;
        break;
      default:
        break;
    }
  }
  return c.ok;
}

// Whether the entry has code ranges, and if so whether they hold pc.
inline bool entry_has_ranges(const entry& e) { return e.has_ranges || (e.has_low && e.has_high); }
inline bool entry_holds(const unit& u, const entry& e, std::uint64_t pc) {
  if (e.has_ranges) return ranges_hold(u, e.ranges, pc);
  if (!e.has_low || !e.has_high) return false;
  const std::uint64_t lo = e.low.indexed ? indexed_address(u, e.low.u) : e.low.u;
  const std::uint64_t hi = e.high.constant ? lo + e.high.u : e.high.indexed ? indexed_address(u, e.high.u) : e.high.u;
  return pc >= lo && pc < hi;
}

// A line program's header: where its opcodes start and its tables.
struct line_header {
  unsigned version = 0, min_inst = 1, line_range = 1, opcode_base = 1, addr_size = 8;
  int line_base = 0;
  bool default_is_stmt = true;
  const unsigned char* std_lengths = nullptr;
  dwarf_cursor program;
  std::vector<const char*> dirs;
  std::vector<std::pair<const char*, std::uint64_t>> files;  // name, directory index
};

// A DWARF 5 directory or file entry format's fields, read per entry.
inline bool read_entries(dwarf_cursor& c, const unit& u, bool files, line_header& h) {
  const unsigned nformats = static_cast<unsigned>(c.fixed(1));
  const unsigned char* formats = c.p;
  for (unsigned i = 0; i < nformats; ++i) (void)c.uleb(), (void)c.uleb();
  const std::uint64_t count = c.uleb();
  for (std::uint64_t k = 0; k < count && c.ok; ++k) {
    dwarf_cursor f(dwarf_span{formats, static_cast<std::size_t>(c.p - formats)}, 0);
    const char* path = nullptr;
    std::uint64_t dir = 0;
    for (unsigned i = 0; i < nformats; ++i) {
      const std::uint64_t type = f.uleb(), form = f.uleb();
      value v;
      read_form(c, u, form, 0, v);
      if (type == 1) path = v.str;  // DW_LNCT_path
      if (type == 2) dir = v.u;     // DW_LNCT_directory_index
    }
    if (files)
      h.files.emplace_back(path, dir);
    else
      h.dirs.push_back(path);
  }
  return c.ok;
}

inline bool read_line_header(const unit& cu, std::uint64_t off, const char* comp_dir, line_header& h) {
  dwarf_cursor c(cu.s->line, off);
  unit u;  // the forms in the header use the line program's offset size
  u.s = cu.s;
  u.version = cu.version;
  u.addr_size = cu.addr_size;
  const std::uint64_t length = c.unit_length(u.offset_size);
  if (!c.need(length)) return false;
  const unsigned char* end = c.p + length;
  c.end = end;
  h.version = static_cast<unsigned>(c.fixed(2));
  if (h.version < 2 || h.version > 5) return false;
  if (h.version >= 5) {
    h.addr_size = static_cast<unsigned>(c.fixed(1));
    (void)c.fixed(1);  // segment selector size
  } else {
    h.addr_size = cu.addr_size;
  }
  const std::uint64_t header_length = c.fixed(u.offset_size);
  if (!c.need(header_length)) return false;
  const unsigned char* program = c.p + header_length;
  h.min_inst = static_cast<unsigned>(c.fixed(1));
  if (h.version >= 4) (void)c.fixed(1);  // maximum operations per instruction (VLIW): 1 assumed
  h.default_is_stmt = c.fixed(1) != 0;
  h.line_base = static_cast<signed char>(c.fixed(1));
  h.line_range = static_cast<unsigned>(c.fixed(1));
  h.opcode_base = static_cast<unsigned>(c.fixed(1));
  h.std_lengths = c.p;
  c.skip(h.opcode_base > 0 ? h.opcode_base - 1 : 0);
  if (h.line_range == 0 || h.opcode_base == 0) return false;
  if (h.version >= 5) {
    if (!read_entries(c, u, false, h) || !read_entries(c, u, true, h)) return false;
  } else {  // DWARF 4: directory 0 is the unit's; file numbers start at 1
    h.dirs.push_back(comp_dir);
    for (const char* d; (d = c.cstr()) && *d;) h.dirs.push_back(d);
    h.files.emplace_back(nullptr, 0);
    for (const char* f; (f = c.cstr()) && *f;) {
      const std::uint64_t dir = c.uleb();
      (void)c.uleb(), (void)c.uleb();  // modification time, length
      h.files.emplace_back(f, dir);
    }
  }
  h.program.p = program;
  h.program.end = end;
  h.program.ok = c.ok && program <= end;
  return h.program.ok;
}

// "dir/name" for file `i` of the header ("" if it has none).
inline std::string file_path(const line_header& h, std::uint64_t i) {
  if (i >= h.files.size() || !h.files[i].first) return {};
  const char* name = h.files[i].first;
  if (name[0] == '/') return name;
  std::string path;
  const std::uint64_t d = h.files[i].second;
  if (d < h.dirs.size() && h.dirs[d] && *h.dirs[d]) {
    if (h.dirs[d][0] != '/' && !h.dirs.empty() && h.dirs[0] && d != 0) (path = h.dirs[0]) += '/';
    (path += h.dirs[d]) += '/';
  }
  return path + name;
}

// Runs the line program to the row that holds pc: file index and line.
inline bool run_line_program(line_header& h, std::uint64_t pc, std::uint64_t& file, unsigned& line) {
  dwarf_cursor& c = h.program;
  struct row {
    std::uint64_t addr = 0, file = 1;
    std::int64_t line = 1;
  } r, prev;
  bool have_prev = false;
  // A row at r: the previous row holds [prev.addr, r.addr).
  auto emit = [&]() {
    if (have_prev && prev.addr <= pc && pc < r.addr) {
      file = prev.file;
      line = prev.line > 0 ? static_cast<unsigned>(prev.line) : 0;
      return true;
    }
    prev = r;
    have_prev = true;
    return false;
  };
  while (c.ok && c.p < c.end) {
    const unsigned op = static_cast<unsigned>(c.fixed(1));
    if (op >= h.opcode_base) {  // special: address and line advance, a row
      const unsigned adj = op - h.opcode_base;
      r.addr += std::uint64_t{adj / h.line_range} * h.min_inst;
      r.line += h.line_base + static_cast<int>(adj % h.line_range);
      if (emit()) return true;
      continue;
    }
    switch (op) {
      case 0: {  // extended
        const std::uint64_t len = c.uleb();
        if (!c.need(len) || len == 0) return false;
        const unsigned char* next = c.p + len;
        const unsigned sub = static_cast<unsigned>(c.fixed(1));
        if (sub == 1) {  // end_sequence: a row, then the state resets
          if (emit()) return true;
          r = row{};
          have_prev = false;
        } else if (sub == 2) {  // set_address
          r.addr = c.fixed(static_cast<unsigned>(len - 1));
        }
        c.p = next;  // define_file, set_discriminator, vendor opcodes: skipped
        break;
      }
      case 1:  // copy
        if (emit()) return true;
        break;
      case 2:
        r.addr += c.uleb() * h.min_inst;
        break;  // advance_pc
      case 3:
        r.line += c.sleb();
        break;  // advance_line
      case 4:
        r.file = c.uleb();
        break;  // set_file
      case 8:
        r.addr += std::uint64_t{(255 - h.opcode_base) / h.line_range} * h.min_inst;
        break;  // const_add_pc
      case 9:
        r.addr += c.fixed(2);
        break;  // fixed_advance_pc
      default:  // others: their operands skipped
        for (unsigned k = 0; k < h.std_lengths[op - 1]; ++k) (void)c.uleb();
        break;
    }
  }
  return false;
}

// Reads the unit header at c into u (with its abbreviations); false for
// units that hold no code (type units) or malformed ones. c ends at the
// unit's first entry; `next` is the offset of the following unit.
inline bool read_unit(dwarf_cursor& c, unit& u, std::uint64_t& next) {
  const auto start = static_cast<std::uint64_t>(c.p - u.s->info.data);
  u.offset = start;
  const std::uint64_t length = c.unit_length(u.offset_size);
  next = static_cast<std::uint64_t>(c.p - u.s->info.data) + length;
  u.end = next;
  if (!c.ok || !c.need(length)) return false;
  c.end = c.p + length;
  u.version = static_cast<unsigned>(c.fixed(2));
  std::uint64_t abbrev_off = 0;
  if (u.version >= 5) {
    const unsigned type = static_cast<unsigned>(c.fixed(1));
    u.addr_size = static_cast<unsigned>(c.fixed(1));
    abbrev_off = c.fixed(u.offset_size);
    if (type != 1 && type != 3) return false;  // compile and partial units only
  } else if (u.version >= 2) {
    abbrev_off = c.fixed(u.offset_size);
    u.addr_size = static_cast<unsigned>(c.fixed(1));
  } else {
    return false;
  }
  if (u.addr_size != 4 && u.addr_size != 8) return false;
  u.first = static_cast<std::uint64_t>(c.p - u.s->info.data);
  u.abbrevs.clear();
  dwarf_cursor a(u.s->abbrev, abbrev_off);
  for (;;) {
    unit::abbrev ab;
    ab.code = a.uleb();
    if (ab.code == 0 || !a.ok) break;
    ab.tag = static_cast<unsigned>(a.uleb());
    ab.children = a.fixed(1) != 0;
    ab.specs = a.p;
    for (;;) {
      const std::uint64_t name = a.uleb(), form = a.uleb();
      if (form == form_implicit_const) (void)a.sleb();
      if ((name == 0 && form == 0) || !a.ok) break;
    }
    u.abbrevs.push_back(ab);
  }
  return c.ok && a.ok;
}

}  // namespace dwarf

}  // namespace goro::detail
