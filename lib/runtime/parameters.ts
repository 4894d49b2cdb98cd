/**
 * SSM parameters (decrypted, cached five minutes by Powertools Parameters). The SSM client is
 * loaded on the first read, so an entry point that reads no parameter never evaluates it.
 */
export type ParameterReader = (name: string) => Promise<string | undefined>;

export const ssmParameter: ParameterReader = async (name) => {
  const { getParameter } = await import('@aws-lambda-powertools/parameters/ssm');
  return getParameter(name, { decrypt: true, maxAge: 300 });
};
