#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) { std::printf("helper %s\n", argc > 1 ? argv[1] : "-"); return argc > 1 && std::atoi(argv[1]) == 7 ? 0 : 3; }
