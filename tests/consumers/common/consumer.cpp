// consumer.c compiled as C++17: the same program, through the header's extern "C".
#include "consumer.c"
