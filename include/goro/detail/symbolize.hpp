// Names for code addresses, for the goroutine dump: the function symbol
// that contains a pc, read from the program's own ELF symbol tables
// (.symtab of the executable and of each loaded object, found with
// dl_iterate_phdr; .dynsym where an object was stripped), demangled with
// abi::__cxa_demangle. No -rdynamic (dladdr sees only exported symbols)
// and no libbacktrace. Tables are read once per object and kept for the
// life of the process (a dump is rare; objects are mapped read-only).
// Where the object was built with -g, file and line, and the functions
// inlined at the pc, come from its DWARF sections in the same mapping
// (debug_frames.hpp).
#pragma once

#include "config.hpp"
#include "debug_frames.hpp"  // ELF only, but outside the #if: the amalgamation inlines a header once
#include "demangle.hpp"      // both symbolizers' (outside the #if, as above)

#if defined(_WIN32)
// Windows: PE modules and their COFF symbol tables.
#include "symbolize_pe.hpp"
#else

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace goro::detail {

class symbol_table {
  struct sym {
    std::uintptr_t addr;  // relative to the object's load bias
    std::uintptr_t size;
    const char* name;     // in the mapped file
  };
  struct object {
    std::string path;
    std::uintptr_t bias = 0;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> segs;  // [lo, hi) at run time
    std::vector<sym> syms;  // sorted by addr
    dwarf_sections dwarf;   // empty without -g
    dwarf_frame_cache lines;
    bool read = false;
  };

 public:
  static symbol_table& instance() {
    static symbol_table* t = new symbol_table;  // never destroyed: a dump may run during exit
    return *t;
  }

  // The symbol containing pc (pc exactly: pass a return address minus one),
  // and with -g the functions inlined there and the lines.
  symbol_info lookup(std::uintptr_t pc) {
    std::lock_guard<std::mutex> lk(lock_);
    object* o = find_object(pc);
    if (!o) {
      refresh_objects();  // a dlopen since the last look
      o = find_object(pc);
    }
    symbol_info r;
    if (!o) return r;
    r.object = o->path;
    if (!o->read) read_symbols(*o);
    const std::uintptr_t rel = pc - o->bias;
    auto it = std::upper_bound(o->syms.begin(), o->syms.end(), rel,
                               [](std::uintptr_t a, const sym& s) { return a < s.addr; });
    if (it == o->syms.begin()) return r;
    --it;
    // Size 0 (hand-written assembly without .size): the nearest symbol below.
    if (it->size != 0 && rel >= it->addr + it->size) return r;
    r.offset = rel - it->addr;
    r.name = demangle(it->name);
    // Not under ThreadSanitizer (as the dump reads no stacks there): its
    // runtime crashed (a SIGSEGV in TraceSwitchPart, clang 14) under the
    // millions of instrumented reads a unit's walk makes, in dump_test's churn case.
    if (!GORO_TSAN && o->dwarf.info.data) {
      add_source(r, o->lines.at(o->dwarf, rel, unreadable_name(r)));
    }
    return r;
  }

 private:
  object* find_object(std::uintptr_t pc) {
    for (auto& o : objects_)
      for (auto& s : o.segs)
        if (pc >= s.first && pc < s.second) return &o;
    return nullptr;
  }

  void refresh_objects() {
    std::vector<object> found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* arg) {
          auto* v = static_cast<std::vector<object>*>(arg);
          object o;
          o.path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
          o.bias = info->dlpi_addr;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
              o.segs.emplace_back(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
          }
          if (!o.segs.empty()) v->push_back(std::move(o));
          return 0;
        },
        &found);
    for (auto& f : found) {
      bool known = false;
      for (auto& o : objects_) known = known || (o.bias == f.bias && o.path == f.path);
      if (!known) objects_.push_back(std::move(f));
    }
  }

  // Maps the object's file and collects its function symbols: .symtab,
  // else .dynsym. Names point into the mapping, which is kept.
  static void read_symbols(object& o) {
    o.read = true;
    int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    void* map = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && st.st_size > static_cast<off_t>(sizeof(ElfW(Ehdr))))
      map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return;
    const auto size = static_cast<std::size_t>(st.st_size);
    const auto* base = static_cast<const unsigned char*>(map);
    const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
    auto bad = [&](std::size_t off, std::size_t len) { return off > size || len > size - off; };
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(ElfW(Shdr)) || bad(eh->e_shoff, std::size_t{eh->e_shnum} * sizeof(ElfW(Shdr)))) {
      ::munmap(map, size);
      return;
    }
    const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
    if (eh->e_ident[EI_DATA] == ELFDATA2LSB) read_dwarf_sections(o, base, size, sh, eh->e_shnum, eh->e_shstrndx);
    for (ElfW(Word) want : {ElfW(Word){SHT_SYMTAB}, ElfW(Word){SHT_DYNSYM}}) {
      for (unsigned i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
        const ElfW(Shdr)& strs = sh[sh[i].sh_link];
        if (bad(sh[i].sh_offset, sh[i].sh_size) || bad(strs.sh_offset, strs.sh_size) || strs.sh_size == 0) continue;
        const auto* syms = reinterpret_cast<const ElfW(Sym)*>(base + sh[i].sh_offset);
        const std::size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
        const char* names = reinterpret_cast<const char*>(base + strs.sh_offset);
        for (std::size_t k = 0; k < n; ++k) {
          const auto type = ELF64_ST_TYPE(syms[k].st_info);
          if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[k].st_shndx == SHN_UNDEF || syms[k].st_value == 0 ||
              syms[k].st_name >= strs.sh_size || names[strs.sh_size - 1] != '\0')
            continue;
          o.syms.push_back({static_cast<std::uintptr_t>(syms[k].st_value), static_cast<std::uintptr_t>(syms[k].st_size),
                            names + syms[k].st_name});
        }
      }
      if (!o.syms.empty()) break;
    }
    // qsort, not std::sort: this runs once per object, and std::sort's
    // instantiation is code every header-only translation unit compiles.
    std::qsort(o.syms.data(), o.syms.size(), sizeof(sym), [](const void* x, const void* y) {
      const sym& a = *static_cast<const sym*>(x);
      const sym& b = *static_cast<const sym*>(y);
      if (a.addr != b.addr) return a.addr < b.addr ? -1 : 1;
      return a.size > b.size ? -1 : a.size < b.size ? 1 : 0;  // an alias of size 0 after the sized one
    });
    // Duplicates (aliases, local copies): keep the first of each address.
    o.syms.erase(std::unique(o.syms.begin(), o.syms.end(), [](const sym& a, const sym& b) { return a.addr == b.addr; }),
                 o.syms.end());
    if (o.syms.empty()) {
      ::munmap(map, size);
      o.dwarf = dwarf_sections{};
    }
  }

  // The DWARF sections that file:line needs, by name (.shstrtab). A
  // compressed one (SHF_COMPRESSED: -gz) leaves the object without lines.
  static void read_dwarf_sections(object& o, const unsigned char* base, std::size_t size, const ElfW(Shdr) * sh,
                                  unsigned n, unsigned names_index) {
    if (names_index >= n) return;
    const ElfW(Shdr)& names = sh[names_index];
    if (names.sh_offset > size || names.sh_size > size - names.sh_offset || names.sh_size == 0) return;
    const char* strs = reinterpret_cast<const char*>(base + names.sh_offset);
    if (strs[names.sh_size - 1] != '\0') return;
    dwarf_sections d;
    for (unsigned i = 0; i < n; ++i) {
      if (sh[i].sh_name >= names.sh_size || sh[i].sh_type == SHT_NOBITS) continue;
      if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset) continue;
      dwarf_span dwarf_sections::*span = dwarf_section_named(strs + sh[i].sh_name);
      if (!span) continue;
      if (sh[i].sh_flags & SHF_COMPRESSED) return;
      d.*span = dwarf_span{base + sh[i].sh_offset, static_cast<std::size_t>(sh[i].sh_size)};
    }
    o.dwarf = d;
  }

  std::mutex lock_;
  std::vector<object> objects_;
};

}  // namespace goro::detail

#endif  // !_WIN32
