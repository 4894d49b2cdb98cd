/**
 * The two parts of the Bedrock Agent Runtime SDK that retrieval uses, in a module of their own:
 * lib/knowledge/bedrock.ts imports this one on first use. A dynamic import of the package itself
 * would keep every command and paginator of it in a bundle; through named imports here the
 * bundler keeps these two (and what they need).
 */
export { BedrockAgentRuntimeClient, RetrieveCommand } from '@aws-sdk/client-bedrock-agent-runtime';
