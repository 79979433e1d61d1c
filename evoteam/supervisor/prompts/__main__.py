"""`python -m evoteam.supervisor.prompts --mode session [--run RUN] [--plugin | --prefix P]`"""

from evoteam.supervisor.prompts import main

main()
