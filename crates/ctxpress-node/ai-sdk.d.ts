// Types of `ctxpress/ai-sdk` (ai-sdk.js, written by hand).
import type { LanguageModelV3CallOptions, LanguageModelV3Middleware, LanguageModelV3Prompt } from '@ai-sdk/provider'
import type { Compressor, Options } from './index'

export interface MiddlewareOptions extends Options {
  /** The shape ctxpress reads the prompt in: 'openai' (default) or 'anthropic'. */
  dialect?: 'openai' | 'anthropic'
  /** A Compressor made already, instead of the options above. */
  compressor?: Compressor
  /** The middleware specification: 'v3' (ai@6, default) or 'v4' (ai@7). */
  specificationVersion?: 'v3' | 'v4'
}

/**
 * A language-model middleware whose `transformParams` compresses the
 * prompt to the window or budget; a prompt at or under the trigger comes
 * back unchanged (the same params object).
 */
export declare function ctxpressMiddleware(options?: MiddlewareOptions): LanguageModelV3Middleware

/** What `transformParams` does: the same object when nothing changed. */
export declare function compressParams<P extends LanguageModelV3CallOptions>(
  params: P,
  compressor: Compressor,
  dialect?: 'openai' | 'anthropic',
): Promise<P>

/** The prompt as the conversation ctxpress reads (each message with `ctxpress_ref`). */
export declare function toConversation(
  prompt: LanguageModelV3Prompt,
  dialect?: 'openai' | 'anthropic',
): { messages: Record<string, unknown>[]; pinned: number[] }

/** A compressed conversation back into prompt messages, unchanged ones as the original objects. */
export declare function fromConversation(
  messages: Record<string, unknown>[],
  prompt: LanguageModelV3Prompt,
  pinned: number[],
  dialect?: 'openai' | 'anthropic',
): LanguageModelV3Prompt
