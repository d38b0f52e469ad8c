// Names for code addresses on Windows, for the goroutine dump
// (detail/symbolize.hpp's interface): the function symbols of the module
// (executable or DLL) that contains a pc, read from the COFF symbol table
// that MinGW-w64's linker leaves in the file unless it is stripped (-s);
// demangled with abi::__cxa_demangle. A stripped module (and MSVC's, whose
// symbols are in a .pdb) gives "??" and the module's path. Tables are read
// once per module and kept for the life of the process. Where the module
// was built with -g, file and line and the calls inlined at a pc come from
// the DWARF sections MinGW-w64 leaves in the file (.debug_info, ...: long
// section names, "/N" into the COFF string table), read with the ELF
// symbolizer's reader (debug_frames.hpp).
#pragma once


#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "../os/windows/windows_h.hpp"
#include "debug_frames.hpp"
#include "demangle.hpp"

namespace goro::detail {

class symbol_table {
  struct sym {
    std::uintptr_t rva;  // relative to the module's base
    std::string name;    // as in the file (mangled)
  };
  struct module {
    std::uintptr_t base = 0;
    std::string path;
    std::vector<sym> syms;  // sorted by rva
    // -g: the file's bytes (DWARF is not mapped) and the sections in them;
    // DWARF addresses are link-time ones, from the preferred image base.
    std::vector<unsigned char> file;
    dwarf_sections dwarf;
    std::uintptr_t image_base = 0;
    dwarf_frame_cache lines;
  };

 public:
  static symbol_table& instance() {
    static symbol_table* t = new symbol_table;  // never destroyed: a dump may run during exit
    return *t;
  }

  // The function symbol containing pc (pc exactly: pass a return address
  // minus one); without sizes in COFF, the nearest one below.
  symbol_info lookup(std::uintptr_t pc) {
    std::lock_guard<std::mutex> lk(lock_);
    symbol_info r;
    HMODULE h = nullptr;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            reinterpret_cast<LPCWSTR>(pc), &h))
      return r;
    module& m = get(reinterpret_cast<std::uintptr_t>(h));
    r.object = m.path;
    const std::uintptr_t rva = pc - m.base;
    auto it = std::upper_bound(m.syms.begin(), m.syms.end(), rva,
                               [](std::uintptr_t a, const sym& s) { return a < s.rva; });
    if (it == m.syms.begin()) return r;
    --it;
    r.offset = rva - it->rva;
    r.name = demangle(it->name.c_str());
    if (m.dwarf.info.data) add_source(r, m.lines.at(m.dwarf, m.image_base + rva, unreadable_name(r)));
    return r;
  }

 private:
  module& get(std::uintptr_t base) {
    for (module& m : modules_)
      if (m.base == base) return m;
    module m;
    m.base = base;
    char path[MAX_PATH];
    const DWORD n = GetModuleFileNameA(reinterpret_cast<HMODULE>(base), path, sizeof path);
    m.path.assign(path, n < sizeof path ? n : 0);
    read_symbols(m);
    modules_.push_back(std::move(m));
    return modules_.back();
  }

  // The COFF symbol table: its place is in the mapped headers, its bytes
  // only in the file (read whole, for the DWARF sections too). Function
  // symbols (type 0x20) of a section, as RVAs.
  static void read_symbols(module& m) {
    const auto* dos = reinterpret_cast<const IMAGE_DOS_HEADER*>(m.base);
    const auto* nt = reinterpret_cast<const IMAGE_NT_HEADERS64*>(m.base + static_cast<std::uintptr_t>(dos->e_lfanew));
    const DWORD table = nt->FileHeader.PointerToSymbolTable, count = nt->FileHeader.NumberOfSymbols;
    if (table == 0 || count == 0 || m.path.empty()) return;
    const IMAGE_SECTION_HEADER* sections = IMAGE_FIRST_SECTION(nt);
    const WORD nsections = nt->FileHeader.NumberOfSections;
    HANDLE f = CreateFileA(m.path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    if (f == INVALID_HANDLE_VALUE) return;
    LARGE_INTEGER size{};
    std::vector<unsigned char>& bytes = m.file;
    const std::uint64_t syms_end = std::uint64_t{table} + std::uint64_t{count} * IMAGE_SIZEOF_SYMBOL;
    if (GetFileSizeEx(f, &size) && static_cast<std::uint64_t>(size.QuadPart) >= syms_end + 4 &&
        static_cast<std::uint64_t>(size.QuadPart) < (std::uint64_t{1} << 32)) {
      bytes.resize(static_cast<std::size_t>(size.QuadPart));
      DWORD got = 0;
      if (!ReadFile(f, bytes.data(), static_cast<DWORD>(bytes.size()), &got, nullptr) || got != bytes.size())
        bytes.clear();
    }
    CloseHandle(f);
    if (bytes.empty()) return;
    const char* strings = reinterpret_cast<const char*>(bytes.data()) + syms_end;  // string table, after the symbols
    const std::size_t strings_size = bytes.size() - static_cast<std::size_t>(syms_end);
    for (DWORD i = 0; i < count; ++i) {
      IMAGE_SYMBOL s;
      std::memcpy(&s, bytes.data() + table + std::size_t{i} * IMAGE_SIZEOF_SYMBOL, sizeof s);
      const DWORD aux = s.NumberOfAuxSymbols;
      if (s.Type == 0x20 && s.SectionNumber > 0 && s.SectionNumber <= nsections) {
        std::string name;
        if (s.N.Name.Short != 0) {
          name.assign(reinterpret_cast<const char*>(s.N.ShortName), strnlen(reinterpret_cast<const char*>(s.N.ShortName), 8));
        } else if (s.N.Name.Long < strings_size) {
          name.assign(strings + s.N.Name.Long, strnlen(strings + s.N.Name.Long, strings_size - s.N.Name.Long));
        }
        if (!name.empty()) m.syms.push_back({sections[s.SectionNumber - 1].VirtualAddress + s.Value, std::move(name)});
      }
      i += aux;
    }
    std::sort(m.syms.begin(), m.syms.end(), [](const sym& a, const sym& b) { return a.rva < b.rva; });
    read_dwarf_sections(m, sections, nsections, strings, strings_size);
    if (!m.dwarf.info.data) {  // no -g: the bytes are not needed any more
      bytes.clear();
      bytes.shrink_to_fit();
    }
  }

  // The DWARF sections that file:line needs, by name; names longer than a
  // section header's 8 bytes are "/N", N the name's offset in the string
  // table. A section's bytes are its raw data in the file, VirtualSize long.
  static void read_dwarf_sections(module& m, const IMAGE_SECTION_HEADER* sections, WORD n, const char* strings,
                                  std::size_t strings_size) {
    const auto* nt = reinterpret_cast<const IMAGE_NT_HEADERS64*>(
        m.base + static_cast<std::uintptr_t>(reinterpret_cast<const IMAGE_DOS_HEADER*>(m.base)->e_lfanew));
    m.image_base = static_cast<std::uintptr_t>(nt->OptionalHeader.ImageBase);
    dwarf_sections d;
    for (WORD i = 0; i < n; ++i) {
      const IMAGE_SECTION_HEADER& sh = sections[i];
      std::string name(reinterpret_cast<const char*>(sh.Name), strnlen(reinterpret_cast<const char*>(sh.Name), 8));
      if (name.size() > 1 && name[0] == '/') {
        const unsigned long off = std::strtoul(name.c_str() + 1, nullptr, 10);
        if (off >= strings_size) continue;
        name.assign(strings + off, strnlen(strings + off, strings_size - off));
      }
      const std::size_t size = sh.Misc.VirtualSize != 0 ? sh.Misc.VirtualSize : sh.SizeOfRawData;
      if (sh.PointerToRawData > m.file.size() || size > m.file.size() - sh.PointerToRawData) continue;
      if (dwarf_span dwarf_sections::*span = dwarf_section_named(name.c_str()))
        d.*span = dwarf_span{m.file.data() + sh.PointerToRawData, size};
    }
    m.dwarf = d;
  }

  std::mutex lock_;
  std::vector<module> modules_;
};

}  // namespace goro::detail
