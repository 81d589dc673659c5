from sglang_patches.cli import main

raise SystemExit(main())
