"""Print the include directory of an installed oneDNN headers wheel, or nothing.

CMake runs this with the Python that runs the build (scikit-build-core's, whose build
environment installs onednn-devel-cpu-gomp from [build-system].requires). The wheel puts its
headers outside site-packages (``../../../include/oneapi/dnnl/*.h`` in its RECORD), so the
directory comes from the distribution's file list rather than from an import.
"""

import importlib.metadata
import os
import sys

DISTRIBUTIONS = ("onednn-devel-cpu-gomp", "onednn-devel")
HEADER = "oneapi/dnnl/dnnl_graph.h"


def main() -> int:
    for name in DISTRIBUTIONS:
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in distribution.files or []:
            if str(file).replace("\\", "/").endswith(HEADER):
                header = os.path.realpath(str(distribution.locate_file(file)))
                if os.path.isfile(header):
                    include = os.path.dirname(os.path.dirname(os.path.dirname(header)))
                    print(f"{include}\n{name} {distribution.version}")
                    return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
