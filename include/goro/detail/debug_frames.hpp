// The functions at a code address, for the goroutine dump: one frame per
// call the compiler inlined there, then the function the code is in, each
// with its file:line (as addr2line -i, gdb's and Go's tracebacks show them).
// From the DWARF of an object's file on disk (-g; debug_line.hpp reads it).
//
// .debug_info's DW_TAG_inlined_subroutine entries that hold the pc, nested
// outermost first inside the function's entry, give each inlined call's
// site in its caller (DW_AT_call_file / DW_AT_call_line) and the callee
// (DW_AT_abstract_origin, whose linkage name names it); the line program's
// row for the pc gives the line inside the innermost function. So at -O2,
// where a goroutine's lambda and goro's own calls are inlined into goro's
// closure, the dump still names the lambda and its line, and "created by"
// the function that called go(), not goro's code around them.
//
// Nothing is kept between lookups but the section pointers (the symbolizer
// keeps the answers per pc): a lookup walks the units' headers to the one
// whose ranges hold the pc, then that unit's entries (skipping the
// subtrees of inlined calls that miss it by DW_AT_sibling where present).
// A dump is rare; memory is only what the dump thread allocates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "debug_line.hpp"
#include "demangle.hpp"

namespace goro::detail {
namespace dwarf {

std::string function_name(const unit& u, std::uint64_t off, int hops = 0);

// Reads the unit's root entry (at the cursor, just past read_unit) and the
// bases its attributes give; false when it is not a compile or partial unit.
inline bool read_root(dwarf_cursor& c, unit& u, entry& root) {
  if (!read_entry(c, u, root) || (root.ab->tag != tag_compile_unit && root.ab->tag != tag_partial_unit)) return false;
  u.addr_base = root.addr_base.u;
  u.rnglists_base = root.rnglists_base.u;
  u.str_offsets_base = root.str_offsets_base.u;
  if (root.has_low) u.base_pc = root.low.indexed ? indexed_address(u, root.low.u) : root.low.u;
  return true;
}

// The unit whose entries hold `off` (an offset in .debug_info), where a
// DW_FORM_ref_addr points: GCC's -flto refers from the code's units to the
// functions' entries in the units its compile step wrote, dwz to the
// partial units it shares. Walks the unit headers from the start (a dump
// is rare).
inline bool unit_containing(const dwarf_sections& s, std::uint64_t off, unit& out) {
  out.s = &s;
  for (std::uint64_t at = 0; at < s.info.size;) {
    dwarf_cursor c(s.info, at);
    unsigned offset_size = 4;
    const std::uint64_t length = c.unit_length(offset_size);
    const std::uint64_t next = static_cast<std::uint64_t>(c.p - s.info.data) + length;
    if (!c.ok || next <= at) return false;
    if (off < next) {
      dwarf_cursor r(s.info, at);
      std::uint64_t end = 0;
      entry root;
      return read_unit(r, out, end) && read_root(r, out, root) && off >= out.first;
    }
    at = next;
  }
  return false;
}

// The scopes around the entry at `target` ("ns::Class::function::"), from
// the entries that enclose it: namespaces, classes (an unnamed one, as a
// lambda's closure type is, as "{lambda}") and functions, walked from the
// unit's first entry (skipping, by DW_AT_sibling, the subtrees that end
// before target). Names are made only for the enclosing entries, once
// target is reached.
inline std::string scope_of(const unit& u, std::uint64_t target, int hops) {
  dwarf_cursor c(dwarf_span{u.s->info.data, u.end}, u.first);
  struct scope {
    unsigned tag;
    const char* name;
    std::uint64_t origin;
  };
  std::vector<scope> scopes;  // the open entries with children, the unit's first
  entry e;
  while (c.ok && c.p < c.end) {
    const auto at = static_cast<std::uint64_t>(c.p - u.s->info.data);
    if (!read_entry(c, u, e)) {
      if (!c.ok || scopes.empty()) break;
      scopes.pop_back();
      continue;
    }
    if (at == target) break;
    if (!e.ab->children) continue;
    if (e.has_sibling && u.offset + e.sibling.u <= target && u.offset + e.sibling.u > at) {
      c = dwarf_cursor(dwarf_span{u.s->info.data, u.end}, u.offset + e.sibling.u);
      continue;
    }
    scopes.push_back({e.ab->tag, string_at(u, e.name), e.origin});
  }
  if (!c.ok) return {};
  std::string out;
  for (std::size_t i = 1; i < scopes.size(); ++i) {
    const scope& sc = scopes[i];
    std::string name;
    switch (sc.tag) {
      case tag_namespace:
        name = sc.name ? sc.name : "(anonymous namespace)";
        break;
      case tag_class_type:
      case tag_structure_type:
      case tag_union_type:
        name = sc.name ? sc.name : "{lambda}";
        break;
      case tag_subprogram:
        if (sc.name)
          name = sc.name;
        else if (sc.origin && hops < 4)
          name = function_name(u, sc.origin, hops + 1);  // an out-of-line definition: its declaration's
        break;
      default:
        break;  // blocks: no name of their own
    }
    if (!name.empty()) out += name + "::";
  }
  return out;
}

// The name of the function an inlined call runs: the entry at `off`
// (DW_AT_abstract_origin) and those it refers to in turn (its own origin,
// its DW_AT_specification: a member function's declaration in its class).
// The first linkage name found, demangled (qualified, with its
// parameters, as the symbol table's names); else (or where the demangler
// gives up) the DW_AT_name, qualified with its scopes (GCC gives a
// lambda's operator() no linkage name); else empty. A reference into
// another unit (DW_FORM_ref_addr: -flto, dwz) goes on in that unit.
inline std::string function_name(const unit& u, std::uint64_t off, int hops) {
  for (int hop = 0; hop < 8 && off != 0; ++hop) {
    if (off < u.first || off >= u.end) {
      unit other;
      if (hops >= 4 || !unit_containing(*u.s, off, other)) break;
      return function_name(other, off, hops + 1);
    }
    dwarf_cursor c(u.s->info, off);
    c.end = u.s->info.data + u.end;
    entry e;
    if (!read_entry(c, u, e)) break;
    if (const char* linkage = string_at(u, e.linkage_name)) {
      std::string name = demangle(linkage);
      if (name.rfind("_Z", 0) != 0)
        return name;  // else one abi::__cxa_demangle cannot read (GCC 12: some generic lambdas')
    }
    if (const char* plain = string_at(u, e.name)) return scope_of(u, off, hops) + plain;
    off = e.origin;
  }
  return {};
}

// Whether the unit describes types (full -g), not only functions and their
// lines (clang's -gline-tables-only, GCC's -g1): there, a function has its
// bare name, no scopes, no linkage name.
inline bool unit_has_types(const unit& u) {
  dwarf_cursor c(dwarf_span{u.s->info.data, u.end}, u.first);
  entry e;
  int depth = 0;
  while (c.ok && c.p < c.end) {
    if (!read_entry(c, u, e)) {
      if (!c.ok || --depth < 0) break;
      continue;
    }
    const unsigned tag = e.ab->tag;
    if (tag == tag_base_type || tag == tag_namespace || tag == tag_structure_type || tag == tag_class_type) return true;
    if (e.ab->children) ++depth;
  }
  return false;
}

}  // namespace dwarf

// The frames at `pc`, a link-time address of the object, innermost first:
// one per inlined call that holds it, then the function the code is in
// (named only with `name_function`: for a symbol abi::__cxa_demangle
// cannot read). Each has the line in that function: the line table's row
// for the innermost, the site of the call inlined into it for the others.
// Empty when the object has no DWARF for pc.
inline std::vector<source_frame> dwarf_frames(const dwarf_sections& s, std::uint64_t pc, bool name_function) {
  using namespace dwarf;
  std::vector<source_frame> out;
  if (!s.info.data || !s.abbrev.data || !s.line.data) return out;
  unit u;
  u.s = &s;
  for (std::uint64_t off = 0, next = 0; off < s.info.size; off = next) {
    dwarf_cursor c(s.info, off);
    if (!read_unit(c, u, next)) {
      if (next <= off) return out;
      continue;
    }
    entry root;
    if (!read_root(c, u, root)) continue;
    if (!root.has_stmt || !entry_holds(u, root, pc)) continue;
    // The entries, depth first, inside the function that holds pc: each
    // inlined call that holds it, outermost first.
    struct inlined_call {
      std::uint64_t origin, file, line;
    };
    std::vector<inlined_call> calls;
    int depth = root.ab->children ? 1 : 0, function_depth = -1, call_depth = -1;
    std::uint64_t function = 0;  // the offset of the function's entry
    entry e;
    while (depth > 0 && c.ok && c.p < c.end) {
      const auto at = static_cast<std::uint64_t>(c.p - s.info.data);
      if (!read_entry(c, u, e)) {
        if (!c.ok) break;
        --depth;                                            // a null entry ends a list of children
        if (depth <= function_depth) break;                 // out of the function that holds pc
        if (call_depth >= 0 && depth <= call_depth) break;  // out of the innermost call that holds it
        continue;
      }
      const unsigned tag = e.ab->tag;
      const bool ranged = entry_has_ranges(e);
      const bool holds = ranged && entry_holds(u, e, pc);
      if (holds && tag == tag_subprogram && function_depth < 0) {
        function = at;
        if (!e.ab->children) break;  // no inlined calls in it
        function_depth = depth;
      }
      if (holds && tag == tag_inlined_subroutine && e.has_call) {
        calls.push_back({e.origin, e.call_file.u, e.call_line.u});
        if (!e.ab->children) break;  // the innermost
        call_depth = depth;
      }
      if (!e.ab->children) continue;
      // Subtrees that cannot hold the pc's entries: skipped where the
      // producer says where the next sibling starts.
      // Only an inlined call that misses pc, or an enumeration: a function
      // or block that misses pc may still hold local types whose functions
      // hold it (a lambda's are in its closure type, inside the function
      // that defines it, outside that function's ranges).
      const bool skip = (tag == tag_inlined_subroutine && ranged && !holds) || tag == tag_enumeration_type;
      if (skip && e.has_sibling && e.sibling.u > static_cast<std::uint64_t>(c.p - s.info.data) - u.offset) {
        c = dwarf_cursor(dwarf_span{s.info.data, static_cast<std::size_t>(c.end - s.info.data)},
                         u.offset + e.sibling.u);
        continue;
      }
      ++depth;
    }
    // Bare names (no scopes) cannot be told apart from goro's own or the
    // standard library's: no inlined frames then, only the function's,
    // with the outermost inlined call's line.
    const bool scoped = unit_has_types(u);
    const bool bare = !calls.empty() && !scoped;
    line_header h;
    if (!read_line_header(u, root.stmt_list.u, string_at(u, root.comp_dir), h)) return out;
    std::uint64_t file = 0;
    unsigned line = 0;
    const bool row = run_line_program(h, pc, file, line);
    auto located = [&](std::string name, std::uint64_t f, std::uint64_t l, bool known) {
      source_frame fr;
      fr.name = std::move(name);
      if (known) fr.file = file_path(h, f);
      fr.line = fr.file.empty() ? 0 : static_cast<unsigned>(l);
      fr.scoped = scoped;
      out.push_back(std::move(fr));
    };
    for (std::size_t i = bare ? 0 : calls.size(); i-- > 0;) {
      std::string name = function_name(u, calls[i].origin);
      if (name.empty()) name = "??";
      if (i + 1 == calls.size())
        located(std::move(name), file, line, row);
      else
        located(std::move(name), calls[i + 1].file, calls[i + 1].line, true);
    }
    std::string name = name_function && function ? function_name(u, function) : std::string();
    if (calls.empty())
      located(std::move(name), file, line, row);
    else
      located(std::move(name), calls.front().file, calls.front().line, true);
    return out;
  }
  return out;
}

// What a symbolizer (symbolize.hpp: ELF; symbolize_pe.hpp: PE) says of a
// code address.
struct symbol_info {
  std::string name;           // demangled; empty when unknown
  std::uintptr_t offset = 0;  // pc - the symbol's start
  std::string object;         // the object's path (for unknown symbols)
  std::string file;           // the source file, where the object has DWARF line information
  unsigned line = 0;          // its line; 0 when unknown
  // The calls inlined at pc, innermost first, each named and with its line;
  // file and line above are then the outermost call's site in the
  // symbol's function.
  std::vector<source_frame> inlined;
  bool scoped = false;  // the debug information names the calls inlined at pc (full -g)
};

// Whether r's name is one abi::__cxa_demangle could not read (GCC 12's
// generic lambdas'), which the debug information then names.
inline bool unreadable_name(const symbol_info& r) { return r.name.rfind("_Z", 0) == 0; }

// Adds dwarf_frames' answer for the symbol's pc to r.
inline void add_source(symbol_info& r, const std::vector<source_frame>& at) {
  if (at.empty()) return;
  r.inlined.assign(at.begin(), at.end() - 1);
  if (unreadable_name(r) && !at.back().name.empty()) r.name = at.back().name;
  r.file = at.back().file;
  r.line = at.back().line;
  r.scoped = at.back().scoped;
}

// An object's answers of dwarf_frames, by address: each walks a whole
// unit, and dumps repeat addresses. Both symbolizers (ELF, PE) keep one per
// object; their caller holds the symbol table's lock.
class dwarf_frame_cache {
 public:
  // The frames at `pc` (a link-time address), computed once (name_function:
  // as dwarf_frames; the same for every lookup of one pc).
  const std::vector<source_frame>& at(const dwarf_sections& s, std::uint64_t pc, bool name_function) {
    std::size_t lo = 0, hi = entries_.size();
    while (lo < hi) {  // the first entry whose key is not below pc
      const std::size_t mid = (lo + hi) / 2;
      if (entries_[mid].key < pc)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < entries_.size() && entries_[lo].key == pc) return entries_[lo].frames;
    std::vector<source_frame> frames = dwarf_frames(s, pc, name_function);
    if (entries_.size() >= max_entries) {  // then the cache starts over
      entries_.clear();
      lo = 0;
    }
    return entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(lo), entry{pc, std::move(frames)})->frames;
  }

 private:
  static constexpr std::size_t max_entries = 4096;
  struct entry {
    std::uint64_t key;
    std::vector<source_frame> frames;
  };
  std::vector<entry> entries_;  // sorted by key
};

}  // namespace goro::detail
