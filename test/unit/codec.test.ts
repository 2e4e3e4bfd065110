import crypto from 'node:crypto';
import { EncryptionCodec, EncryptionCodecError, dataConverterFor } from '../../lib/temporal/codec';
import { codecWith, fromPayload, metaText, randomKey, toPayload } from '../fixtures/codec/keys';

describe('EncryptionCodec', () => {
  const secret = `s3cret-${crypto.randomUUID()}`;

  test('round trip: encrypted on the wire, identical after decode', async () => {
    const codec = codecWith([['k1', randomKey()]]);
    const original = [toPayload({ secret }), toPayload(null), toPayload(new Uint8Array([1, 2, 3]))];
    const encoded = await codec.encode(original);

    expect(encoded).toHaveLength(3);
    for (const p of encoded) {
      expect(metaText(p, 'encoding')).toBe('binary/encrypted');
      expect(metaText(p, 'encryption-key-id')).toBe('k1');
      expect(Buffer.from(p.data!).includes(secret)).toBe(false);
    }
    // The original's metadata is inside the ciphertext, not beside it.
    expect(Object.keys(encoded[0].metadata!).sort()).toEqual(['encoding', 'encryption-key-id']);

    const decoded = await codec.decode(encoded);
    expect(fromPayload(decoded[0])).toEqual({ secret });
    expect(fromPayload(decoded[1])).toBeNull();
    expect(fromPayload<Uint8Array>(decoded[2])).toEqual(new Uint8Array([1, 2, 3]));
  });

  test('the same value encrypts differently each time (random IV)', async () => {
    const codec = codecWith([['k1', randomKey()]]);
    const [a, b] = await codec.encode([toPayload(secret), toPayload(secret)]);
    expect(Buffer.from(a.data!).equals(Buffer.from(b.data!))).toBe(false);
  });

  test('rotation: history encrypted with the old key still decodes; new payloads use the new key', async () => {
    const oldKey = randomKey();
    const before = codecWith([['old', oldKey]]);
    const stored = await before.encode([toPayload({ secret })]);

    const after = codecWith([['new', randomKey()], ['old', oldKey]]);
    expect(fromPayload((await after.decode(stored))[0])).toEqual({ secret });
    const fresh = await after.encode([toPayload({ secret })]);
    expect(metaText(fresh[0], 'encryption-key-id')).toBe('new');
  });

  test('an unknown key id fails clearly', async () => {
    const stored = await codecWith([['gone', randomKey()]]).encode([toPayload(secret)]);
    const codec = codecWith([['k2', randomKey()]]);
    await expect(codec.decode(stored)).rejects.toThrow(EncryptionCodecError);
    await expect(codec.decode(stored)).rejects.toThrow(/unknown key id "gone".*known: k2/);
  });

  test('a different key under the same id, or altered data, fails authentication', async () => {
    const stored = await codecWith([['k1', randomKey()]]).encode([toPayload(secret)]);
    await expect(codecWith([['k1', randomKey()]]).decode(stored)).rejects.toThrow(/failed authentication with key "k1"/);

    const key = randomKey();
    const codec = codecWith([['k1', key]]);
    const [p] = await codec.encode([toPayload(secret)]);
    const data = Buffer.from(p.data!);
    data[20] ^= 1;
    await expect(codec.decode([{ ...p, data }])).rejects.toThrow(/failed authentication/);
  });

  test('refuses a payload it did not encrypt: without the key nobody starts or signals a workflow', async () => {
    const codec = codecWith([['k1', randomKey()]]);
    await expect(codec.decode([toPayload({ vmid: 240, cores: 7 })])).rejects.toThrow(/not encrypted \(encoding "json\/plain"\).*use the API/);
    await expect(codec.decode([{ metadata: {}, data: new Uint8Array() }])).rejects.toThrow(EncryptionCodecError);
  });

  test('refuses a key of the wrong size, or an encrypting key that is not in the map', () => {
    expect(() => new EncryptionCodec({ keys: new Map([['k', crypto.randomBytes(16)]]), encryptWith: 'k' })).toThrow(/16 bytes/);
    expect(() => new EncryptionCodec({ keys: new Map([['k', randomKey()]]), encryptWith: 'x' })).toThrow(/"x"/);
  });

  test('dataConverterFor puts the codec in payloadCodecs', () => {
    const codec = codecWith([['k1', randomKey()]]);
    expect(dataConverterFor(codec)).toEqual({ payloadCodecs: [codec] });
  });
});

describe('EncryptionCodec: payloads bound to their workflow', () => {
  const key = randomKey();
  const display = codecWith([['k1', key]]);
  const worker = new EncryptionCodec({ keys: new Map([['k1', key]]), encryptWith: 'k1', worker: true });
  const ctx = (workflowId: string) => ({ type: 'workflow' as const, namespace: 'default', workflowId });

  test('a payload written for one workflow is refused by another, and read by its own and its schedule runs', async () => {
    const [p] = await display.encode([toPayload({ vmid: 240 })], ctx('vm-240'));
    expect(metaText(p, 'encryption-workflow-id')).toBe('vm-240');
    expect(fromPayload(await worker.decode([p], ctx('vm-240')).then((d) => d[0]))).toEqual({ vmid: 240 });
    expect(fromPayload(await worker.decode([p], ctx('vm-240-2026-12-02T06:00:00Z')).then((d) => d[0]))).toEqual({ vmid: 240 });
    await expect(display.decode([p], ctx('vm-241'))).rejects.toThrow(/payload of workflow "vm-240" given to workflow "vm-241"/);
    await expect(display.decode([p], ctx('vm-2400'))).rejects.toThrow(EncryptionCodecError);
    // The binding is authenticated: renaming it breaks the ciphertext.
    const renamed = { ...p, metadata: { ...p.metadata, 'encryption-workflow-id': Buffer.from('vm-241') } };
    await expect(display.decode([renamed], ctx('vm-241'))).rejects.toThrow(/failed authentication/);
    // For display (no context), bound payloads read as before.
    expect(fromPayload((await display.decode([p]))[0])).toEqual({ vmid: 240 });
  });

  test('for a workflow, the worker turns a refusal into a value its interceptor fails the workflow on', async () => {
    const [unbound] = await display.encode([toPayload({ vmid: 240 })]);
    const refused = (await worker.decode([toPayload({ vmid: 240 }), unbound], ctx('vm-240'))).map((d) => fromPayload<Record<string, string>>(d));
    expect(refused[0].qemurunRefusedPayload).toMatch(/not encrypted/);
    expect(refused[1].qemurunRefusedPayload).toMatch(/bound to no workflow/);
    // Elsewhere (activities, display) a refusal stays an error, and display reads old payloads.
    await expect(worker.decode([toPayload(1)], { type: 'activity', namespace: 'default', workflowId: 'vm-240', isLocal: false })).rejects.toThrow(/not encrypted/);
    expect(fromPayload((await display.decode([unbound], ctx('vm-240')))[0])).toEqual({ vmid: 240 });
  });
});
