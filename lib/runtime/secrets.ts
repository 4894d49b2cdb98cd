/**
 * The operator's secrets, behind `secret(name)` as components see it (`{secret.NAME}` in Invoke
 * headers): values given directly (EASEL_SECRET_<NAME>), else SSM parameters named in
 * EASEL_SSM_SECRETS. Invoke fills its headers synchronously, so SSM-held values are fetched
 * ahead, when the secrets are built; with none configured, SSM is never loaded.
 *
 * Tenant secrets are not resolved here: lib/runtime/index.ts takes a resolver built on top of
 * these (`RuntimeOptions.secrets`).
 */
import type { SecretsConfig } from '../config';
import { type ParameterReader, ssmParameter } from './parameters';

/** A secret's value by name; undefined when there is no such secret. */
export type SecretLookup = (name: string) => string | undefined;

export interface OperatorSecretsOptions {
  /** @default SSM through Powertools Parameters */
  read?: ParameterReader;
  /** Told when the SSM-held secrets could not be read. */
  onError?: (error: unknown) => void;
}

export function operatorSecrets(config: SecretsConfig, options: OperatorSecretsOptions = {}): SecretLookup {
  const read = options.read ?? ssmParameter;
  const fetched = new Map<string, string>();
  const parameters = Object.entries(config.parameters);
  if (parameters.length > 0) {
    void Promise.all(parameters.map(async ([name, parameter]) => {
      const value = await read(parameter);
      if (value !== undefined) fetched.set(name, value);
    })).catch((error: unknown) => options.onError?.(error));
  }
  return (name) => config.values[name] ?? fetched.get(name);
}
