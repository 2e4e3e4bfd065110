import { z } from 'zod';

/** The bodies of the VM operations, in the seed's shape; each error message names the rule. */

export const cpuBody = z
  .object({ cpu: z.number({ error: 'must be an integer from 1 to 32' }).int('must be an integer from 1 to 32').min(1, 'must be at least 1').max(32, 'must be at most 32') })
  .strict();
export const memoryBody = z
  .object({
    memory: z
      .number({ error: 'must be an integer number of MB from 512 to 32768' })
      .int('must be an integer number of MB from 512 to 32768')
      .min(512, 'must be at least 512 (MB)')
      .max(32768, 'must be at most 32768 (MB)'),
  })
  .strict();
/** The increment a disk grows by, as the seed took it: `<n>G`. */
const MAX_DISK_INCREMENT_GB = 4096;
export const diskBody = z
  .object({
    disk: z.string({ error: 'must be a string like "16G"' }).superRefine((v, ctx) => {
      const problem = !/^\d{1,9}G$/.test(v)
        ? 'must be a whole number of GiB followed by G, like "16G"'
        : Number(v.slice(0, -1)) < 1
          ? 'must grow the disk by at least 1G'
          : Number(v.slice(0, -1)) > MAX_DISK_INCREMENT_GB
            ? `must be at most ${MAX_DISK_INCREMENT_GB}G at a time`
            : undefined;
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  })
  .strict();
/** Adoption takes no options: an empty body or `{}`. */
export const adoptBody = z.object({}).strict();
export const nodeBody = z.object({ node: z.string({ error: 'must be the name of a cluster node' }).min(1, 'must be the name of a cluster node') }).strict();
