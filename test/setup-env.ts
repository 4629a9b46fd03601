// Run before every test file: $SHOAL_CONFIG points at a fresh empty directory, so that `shoal
// init` and `shoal dev` write their admin credential there (never to ~/.config/shoal) and the
// CLI finds none until a test makes one (src/cli/credential-file.ts).

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

process.env.SHOAL_CONFIG = mkdtempSync(path.join(os.tmpdir(), 'shoal-config-'));
