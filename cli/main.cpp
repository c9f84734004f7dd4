// seqpar: predicts and reports sequence-parallel attention plans (see `seqpar --help`).
#include "app.hpp"

int main(int argc, char** argv) { return seqpar::cli::run(argc, argv); }
