#!/usr/bin/env python3
"""Write the seed corpora of the two JSON fuzzers (run from anywhere):

  tests/fuzz/gw_seeds/   fuzz_gw_parse: one flag byte (bit 0 openai, bit 1
                         /tokenize, bits 2-3 --max-client-batch 1/2/8/2048,
                         bit 4 --auto-truncate), then a request body: the
                         OpenAI and TEI forms, every option, token-id
                         inputs, and the usual mistakes (wrong types, empty
                         lists, mixed inputs, bad JSON); bit 5: a /decode
                         body instead (bit 6: a 5-id vocabulary); bit 7: a
                         /rerank body (with bit 1: /v1/rerank's); bits 7
                         and 6: a /predict body (with bit 1: /classify's);
                         bits 7 and 5: a /score body.
  tests/fuzz/cfg_seeds/  fuzz_config: the files of a model directory joined
                         by NUL bytes, in fuzz_config.c's order (config.json,
                         modules.json, 1_Pooling/config.json,
                         sentence_bert_config.json,
                         config_sentence_transformers.json,
                         tokenizer_config.json, 2_Dense/config.json, the
                         JSON header of model.safetensors, tokenizer.json,
                         router_config.json, d/config.json, p/config.json);
                         fewer pieces = absent files, None = an empty one.

Files whose name starts with "crash-" are reproducers of fixed bugs and are
left alone.  Standard library only."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

OPENAI, TOKENIZE, TRUNC, DECODE, VOCAB5, RERANK = 1, 2, 16, 32, 64, 128
BATCH = {1: 0 << 2, 2: 1 << 2, 8: 2 << 2, 2048: 3 << 2}

GW = {
    "oa_string": (OPENAI | BATCH[2048], {"input": "Hello world", "model": "text-embedding-3-small"}),
    "oa_list_base64": (OPENAI | BATCH[2048], {"input": ["a", "b", "c"], "model": "m", "encoding_format": "base64",
                                              "dimensions": 128, "user": "u-1"}),
    "oa_ids": (OPENAI | BATCH[8], {"input": [101, 7592, 2088, 102], "encoding_format": "float"}),
    "oa_ids_batch": (OPENAI | BATCH[8], {"input": [[101, 7592, 102], [101, 2088, 102]], "dimensions": 64}),
    "oa_int8": (OPENAI | BATCH[2], {"input": "x", "encoding_format": "int8"}),
    "oa_ubinary_trunc": (OPENAI | TRUNC | BATCH[2], {"input": ["long text " * 20], "encoding_format": "ubinary"}),
    "oa_too_many": (OPENAI | BATCH[1], {"input": ["one", "two", "three"]}),
    "tei_full": (BATCH[2048], {"inputs": "What is Deep Learning?", "normalize": True, "truncate": True,
                               "truncation_direction": "left", "prompt_name": "query"}),
    "tei_list_uint8": (BATCH[8], {"inputs": ["a", "b"], "output_dtype": "uint8", "chunked": True}),
    "tei_binary": (BATCH[8], {"inputs": "x", "encoding_format": "binary", "output_dtype": "binary"}),
    "tei_contradict": (BATCH[8], {"inputs": "x", "encoding_format": "int8", "output_dtype": "uint8"}),
    "tei_nulls": (TRUNC | BATCH[8], {"inputs": "x", "normalize": None, "truncate": None, "dimensions": None,
                                     "prompt_name": None, "encoding_format": None}),
    "tok_list": (TOKENIZE | BATCH[2048], {"inputs": ["Hello there", "General Kenobi"], "add_special_tokens": False}),
    "tok_oa": (OPENAI | TOKENIZE | BATCH[8], {"input": "tokenize me", "add_special_tokens": True}),
    "wrong_types": (BATCH[8], {"inputs": {"a": [1, [2, {"b": None}]]}, "normalize": "yes", "dimensions": 1.5}),
    "mixed": (OPENAI | BATCH[8], {"input": ["a", [1, 2]]}),
    "mixed_ids": (BATCH[8], {"inputs": [[1, 2], "a"]}),
    "ids_not_int": (BATCH[8], {"inputs": [1, "2", 3.0]}),
    "rerank": (RERANK | BATCH[2048], {"query": "What is Deep Learning?", "texts": ["Deep learning is ...", "cheese"],
                                      "raw_scores": True, "return_text": True, "truncate": True,
                                      "truncation_direction": "left"}),
    "rerank_bad": (RERANK | BATCH[1], {"query": ["q"], "texts": ["a", 1]}),
    "rerank_v1": (RERANK | TOKENIZE | BATCH[8], {"model": "m", "query": "q", "documents": ["a", {"text": "b"}],
                                               "top_n": 1, "return_documents": False}),
    "predict_one": (RERANK | VOCAB5 | BATCH[2048], {"inputs": "I loved it", "raw_scores": True}),
    "predict_pair": (RERANK | VOCAB5 | TRUNC | BATCH[8], {"inputs": ["premise", "hypothesis"], "truncate": False,
                                                          "truncation_direction": "left"}),
    "predict_batch": (RERANK | VOCAB5 | BATCH[8], {"inputs": ["a", ["b", "c"], "d"]}),
    "predict_bad": (RERANK | VOCAB5 | BATCH[2], {"inputs": ["a", ["b"], ["c", "d", "e"], 3]}),
    "classify": (RERANK | VOCAB5 | TOKENIZE | BATCH[8], {"model": "m", "input": ["good", "bad"]}),
    "classify_pair": (RERANK | VOCAB5 | TOKENIZE | BATCH[8], {"input": [["a", "b"]]}),
    "score_one": (RERANK | DECODE | BATCH[8], {"model": "m", "text_1": "q", "text_2": ["a", "b"], "truncate": True}),
    "score_pairs": (RERANK | DECODE | TRUNC | BATCH[2], {"text_1": ["q1", "q2"], "text_2": ["a", "b"],
                                                        "truncation_direction": "left"}),
    "score_bad": (RERANK | DECODE | BATCH[8], {"text_1": ["q1", "q2"], "text_2": ["a", 3, "c"]}),
    "empty_ids": (BATCH[8], {"inputs": [[]]}),
    "empty_list": (BATCH[8], {"inputs": []}),
    "null_input": (BATCH[8], {"inputs": None}),
    "tei_task": (BATCH[8], {"inputs": ["a", "b"], "task": "query", "prompt_name": None}),
    "tei_task_type": (BATCH[8], {"inputs": "a", "task": ["query"]}),
    "bad_dir": (BATCH[8], {"inputs": "a", "truncation_direction": "middle"}),
    "dims_zero": (OPENAI | BATCH[8], {"input": "a", "dimensions": 0}),
    "dims_huge": (OPENAI | BATCH[8], {"input": "a", "dimensions": 2 ** 40}),
    "ids_extreme": (BATCH[8], {"inputs": [[9223372036854775807, -9223372036854775808, -1, 0]]}),
    "unicode": (BATCH[8], {"inputs": ["\u00e9\u4e2d\U0001F600", "tab\there", "\\ \" /"]}),
    "sim": (BATCH[8], {"inputs": {"source_sentence": "a cat", "sentences": ["a dog", "a car"]},
                       "parameters": {"truncate": True, "truncation_direction": "left", "prompt_name": None}}),
    "sim_bad": (BATCH[2], {"inputs": {"source_sentence": 1, "sentences": ["x", 2, "y"]}, "parameters": [1]}),
    "sim_top_opts": (BATCH[8], {"inputs": {"source_sentence": "s", "sentences": []}, "normalize": False}),
    "dec_one": (DECODE | BATCH[8], {"ids": [101, 7592, 2088, 102]}),
    "dec_batch": (DECODE | BATCH[8], {"ids": [[101, 7592, 102], [], [0, 30521]], "skip_special_tokens": False}),
    "dec_small_vocab": (DECODE | VOCAB5 | BATCH[2], {"ids": [[0, 4], [5]], "skip_special_tokens": None}),
    "dec_mixed": (DECODE | BATCH[8], {"ids": [[1], 2], "skip_special_tokens": "no"}),
    "dec_too_many": (DECODE | BATCH[1], {"ids": [[1], [2]]}),
    "dec_extreme": (DECODE | BATCH[8], {"ids": [9223372036854775807, -1, 30522]}),
}

RAW = {
    "not_object": (BATCH[8], b"[1,2,3]"),
    "truncated": (OPENAI | BATCH[8], b'{"input": ["abc", "de'),
    "deep": (BATCH[8], b'{"inputs":' + b"[" * 300 + b"]" * 300 + b"}"),
    "escapes": (BATCH[8], b'{"inputs":"\\ud83d\\ude00 \\u00e9 \\n"}'),
    "nul_escape": (BATCH[8], b'{"inputs":"a\\u0000b"}'),
    "lone_surrogate": (BATCH[8], b'{"inputs":"\\ud800"}'),
    "dup_keys": (OPENAI | BATCH[8], b'{"input":"a","input":[1,2],"dimensions":3,"dimensions":"x"}'),
    "empty": (BATCH[8], b""),
    "scalar": (BATCH[8], b"42"),
}

BERT = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 128,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0,
        "position_embedding_type": "absolute"}
ROBERTA = dict(BERT, model_type="xlm-roberta", pad_token_id=1, max_position_embeddings=130, hidden_act="gelu_new")
DISTIL = {"model_type": "distilbert", "dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128, "vocab_size": 100,
          "max_position_embeddings": 128, "activation": "gelu"}
MPNET = {"model_type": "mpnet", "architectures": ["MPNetForMaskedLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 130,
         "layer_norm_eps": 1e-5, "hidden_act": "gelu", "pad_token_id": 1, "relative_attention_num_buckets": 32}
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": True,
         "hidden_act": "silu", "rope_scaling": None, "use_sliding_window": False,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000}, "is_causal": False}
MISTRAL = dict({k: v for k, v in QWEN3.items() if k not in ("head_dim", "is_causal")}, model_type="mistral",
               architectures=["MistralModel"], head_dim=None, sliding_window=32, mlp_bias=False)
QWEN2 = dict(MISTRAL, model_type="qwen2", architectures=["Qwen2Model"], sliding_window=4096, max_window_layers=2)
LLAMA3 = dict({k: v for k, v in MISTRAL.items() if k not in ("sliding_window", "rope_parameters")}, model_type="llama",
              architectures=["LlamaModel"], attention_bias=False, rope_theta=500000.0,
              rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192})
GEMMA3 = {"model_type": "gemma3_text", "architectures": ["Gemma3TextModel"], "hidden_size": 64,
          "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
          "intermediate_size": 96, "vocab_size": 512, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
          "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None, "sliding_window": 512,
          "sliding_window_pattern": 3, "query_pre_attn_scalar": 32, "use_bidirectional_attention": True,
          "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None, "final_logit_softcapping": None}
MODERNBERT = {"model_type": "modernbert", "architectures": ["ModernBertModel"], "hidden_size": 64,
              "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 512,
              "max_position_embeddings": 8192, "norm_eps": 1e-5, "norm_bias": False, "attention_bias": False,
              "mlp_bias": False, "hidden_activation": "gelu", "local_attention": 128, "global_attn_every_n_layers": 3,
              "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "pad_token_id": 50283}
T5 = {"model_type": "t5", "architectures": ["T5EncoderModel"], "d_model": 64, "d_kv": 16, "d_ff": 96, "num_layers": 2,
      "num_heads": 4, "vocab_size": 512, "feed_forward_proj": "relu", "relative_attention_num_buckets": 32,
      "relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6, "is_encoder_decoder": False,
      "n_positions": 512}
# nomic-embed-text-v1.5's config.json keys (Nomic's own modeling code), and transformers' NomicBertConfig
NOMIC = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "activation_function": "swiglu",
         "n_embd": 64, "n_head": 4, "n_inner": 96, "n_layer": 2, "n_positions": 8192, "layer_norm_epsilon": 1e-12,
         "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
         "rotary_scaling_factor": None, "prenorm": False, "qkv_proj_bias": False, "mlp_fc1_bias": False,
         "mlp_fc2_bias": False, "causal": False, "scale_attn_weights": True, "use_rms_norm": False,
         "parallel_block": False, "type_vocab_size": 2, "vocab_size": 512}
NOMIC_HF = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 512,
            "max_position_embeddings": 2048, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}, "head_dim": 16}
# Alibaba-NLP/gte-base-en-v1.5's config.json keys (new-impl's NewConfig), and Snowflake's "gte" copy with mixed NTK
GTE = {"model_type": "new", "architectures": ["NewModel"], "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 512, "max_position_embeddings": 8192,
       "type_vocab_size": 0, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "layer_norm_type": "layer_norm",
       "position_embedding_type": "rope", "rope_theta": 500000, "rope_scaling": {"factor": 2.0, "type": "ntk"},
       "pack_qkv": True, "logn_attention_scale": False, "logn_attention_clip1": False, "unpad_inputs": False,
       "use_memory_efficient_attention": False}
GTE_MIXED = dict(GTE, model_type="gte", architectures=["GteModel"], type_vocab_size=1, pack_qkv=False,
                 rope_scaling={"type": "ntk", "factor": 4, "mixed_b": 1.5})
# jinaai/jina-embeddings-v2-base-en's config.json keys (JinaBertConfig: model_type bert with ALiBi)
JINA = {"model_type": "bert", "architectures": ["JinaBertForMaskedLM"], "hidden_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 6, "intermediate_size": 128, "vocab_size": 512, "max_position_embeddings": 8192,
        "type_vocab_size": 2, "position_embedding_type": "alibi", "feed_forward_type": "geglu", "hidden_act": "gelu",
        "emb_pooler": "mean", "attn_implementation": "torch", "layer_norm_eps": 1e-12, "pad_token_id": 0}
DEBERTA3 = {"model_type": "deberta-v2", "architectures": ["DebertaV2ForSequenceClassification"], "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 512,
            "max_position_embeddings": 512, "type_vocab_size": 0, "relative_attention": True, "position_buckets": 256,
            "max_relative_positions": -1, "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm",
            "share_att_key": True, "position_biased_input": False, "layer_norm_eps": 1e-7, "pooler_hidden_size": 64,
            "pooler_hidden_act": "gelu", "id2label": {"0": "entailment", "1": "neutral", "2": "contradiction"}}
MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
POOL_MEAN = {"word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
             "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
             "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True}
POOL_LAST = dict(POOL_MEAN, pooling_mode_mean_tokens=False, pooling_mode_lasttoken=True, include_prompt=False)
SBERT = {"max_seq_length": 64, "do_lower_case": True}
PROMPTS = {"prompts": {"query": "query: ", "passage": "passage: ", "empty": ""}, "default_prompt_name": "query",
           "similarity_fn_name": "cosine"}
TOKCFG = {"model_max_length": 1000000000000000019884624838656, "do_lower_case": True, "tokenizer_class": "BertTokenizer"}

CFG = {
    "bert_only": [BERT],
    "bert_full": [BERT, MODULES, POOL_MEAN, SBERT, PROMPTS, TOKCFG],
    "roberta_st": [ROBERTA, MODULES, POOL_MEAN, {"max_seq_length": 512}, {}, {"model_max_length": 77}],
    "distilbert_modules": [DISTIL, MODULES[:2], dict(POOL_MEAN, pooling_mode_mean_tokens=False,
                                                     pooling_mode_cls_token=True)],
    "qwen3_prompts": [QWEN3, MODULES, POOL_LAST, {}, {"prompts": {"query": "Instruct: x\nQuery: "},
                                                        "default_prompt_name": None}],
    "mistral_st": [MISTRAL, MODULES, POOL_LAST, {"max_seq_length": 4096}],
    "qwen2_only": [QWEN2],
    "llama3_rope": [LLAMA3],
    "gemma3_st": [GEMMA3, MODULES, POOL_MEAN, {"max_seq_length": 2048}],
    "modernbert_st": [MODERNBERT, MODULES, dict(POOL_MEAN, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True),
                      {"max_seq_length": 8192}],
    "dense_st": [BERT, MODULES[:2] + [{"idx": 2, "name": "2", "path": "2_Dense",
                                       "type": "sentence_transformers.models.Dense"}] + MODULES[2:],
                 POOL_MEAN, {}, {}, {}, {"in_features": 64, "out_features": 16, "bias": True,
                                         "activation_function": "torch.nn.modules.activation.Tanh"}],
    # sentence-transformers 6's Pooling keys; its length cap in tokenizer_config.json
    "t5_st6": [T5, MODULES, {"embedding_dimension": 64, "pooling_mode": ["mean"], "include_prompt": True}, {}, {},
               {"model_max_length": 128}],
    "nomic_st": [NOMIC, MODULES, POOL_MEAN, {"max_seq_length": 8192},
                 {"prompts": {"query": "search_query: ", "document": "search_document: "}, "default_prompt_name": None}],
    "nomic_hf": [NOMIC_HF],
    "gte_st": [GTE, MODULES, dict(POOL_MEAN, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True),
               {"max_seq_length": 8192}],
    "gte_mixed": [GTE_MIXED],
    "jina_st": [JINA, MODULES, dict(POOL_MEAN, word_embedding_dimension=96), {"max_seq_length": 8192}],
    "mpnet_st": [MPNET, MODULES, POOL_MEAN, {"max_seq_length": 128, "do_lower_case": False}],
    # SPLADE: the masked-LM head and SpladePooling (in the fuzzer's 1_Pooling folder)
    "splade_st": [dict(BERT, architectures=["BertForMaskedLM"]),
                  [{"type": "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer", "path": ""},
                   {"type": "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling",
                    "path": "1_Pooling"}],
                  {"pooling_strategy": "sum", "activation_function": "log1p_relu", "embedding_dimension": None}],
    # inference-free SPLADE: a Router (router_config.json) whose document route's transformer and
    # SpladePooling sit in the fuzzer's d/ and p/ folders; the root holds no config.json (an empty piece)
    "router_ifs": [None, [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Router"}], {}, {},
                   {"prompts": {"query": "", "document": ""}, "default_prompt_name": None}, {}, {}, None, None,
                   {"types": {"q": "sentence_transformers.sparse_encoder.models.SparseStaticEmbedding",
                              "d": "sentence_transformers.sparse_encoder.models.MLMTransformer",
                              "p": "sentence_transformers.sparse_encoder.models.SpladePooling"},
                    "structure": {"query": ["q"], "document": ["d", "p"]},
                    "parameters": {"default_route": "document", "allow_empty_key": True, "route_mappings": {}}},
                   dict(BERT, architectures=["BertForMaskedLM"]),
                   {"pooling_strategy": "max", "activation_function": "relu", "embedding_dimension": None}],
    # the original Qwen3-Reranker: a ForCausalLM scored by two tokens' LM rows (vLLM's classifier_from_token),
    # their ids from the tokenizer.json piece
    "qwen3_from_tokens": [dict(QWEN3, architectures=["Qwen3ForCausalLM"], classifier_from_token=["no", "yes"],
                               is_original_qwen3_reranker=True), MODULES[:2], POOL_LAST, {}, {}, {}, {}, {},
                          {"added_tokens": [{"id": 5, "content": "yes"}], "model": {"vocab": {"no": 3, "x": 4}}}],
    # sequence classifiers: named labels, the multi-label rule, broken labels
    "classifier_labels": [dict(BERT, architectures=["BertForSequenceClassification"],
                               id2label={"0": "neg", "1": "neu", "2": "pos"}, problem_type="single_label_classification")],
    "classifier_multi": [dict(ROBERTA, architectures=["XLMRobertaForSequenceClassification"], num_labels=4,
                              problem_type="multi_label_classification")],
    "classifier_qwen3": [dict(QWEN3, architectures=["Qwen3ForSequenceClassification"], num_labels=1, pad_token_id=0)],
    "classifier_bad_labels": [dict(BERT, architectures=["BertForSequenceClassification"],
                                   id2label={"0": "a", "7": "b", "x": None}, num_labels="2")],
    # DeBERTa v3 (an NLI classifier) and v2's form: positions, own projections, the string pos_att_type
    "deberta3_nli": [DEBERTA3],
    "deberta2_rr": [dict(DEBERTA3, position_buckets=-1, max_relative_positions=64, pos_att_type="c2p|p2c",
                         share_att_key=False, position_biased_input=True, type_vocab_size=2, norm_rel_ebd="none",
                         num_labels=1, id2label=None, pooler_hidden_act="tanh")],
    # DeBERTa v1 (deberta-base-mnli's form: model_type deberta, the string pos_att_type, no v2 keys)
    "deberta1_nli": [{k: v for k, v in dict(DEBERTA3, model_type="deberta", architectures=[
        "DebertaForSequenceClassification"], pos_att_type="c2p|p2c", talking_head=False).items()
        if k not in ("position_buckets", "norm_rel_ebd", "share_att_key")}],
    "old_arch_only": [{k: v for k, v in BERT.items() if k != "model_type"}],
    "bad_modules": [BERT, [{"type": "sentence_transformers.models.Dense", "path": "2_Dense"}, 7]],
    "escape_path": [BERT, [{"type": "Pooling", "path": "../../etc"}]],
    # sentence-transformers' StaticEmbedding at the root (no config.json: an empty piece), a Dense after it,
    # the safetensors header (fuzz_config.c adds the length prefix and the data), the tokenizer's truncation
    "static_st6": [None, [{"type": "sentence_transformers.models.StaticEmbedding", "path": ""},
                          {"type": "sentence_transformers.models.Dense", "path": "2_Dense"},
                          {"type": "sentence_transformers.models.Normalize", "path": "3_Normalize"}],
                   {}, {}, {"prompts": {"query": "q: "}}, {},
                   {"in_features": 8, "out_features": 4, "bias": True,
                    "activation_function": "torch.nn.modules.activation.Tanh"},
                   {"embedding.weight": {"dtype": "F32", "shape": [16, 8], "data_offsets": [0, 512]}},
                   {"truncation": {"max_length": 64}}],
    # model2vec's tensors
    "static_m2v": [None, [{"type": "sentence_transformers.models.StaticEmbedding", "path": "."}], {}, {}, {}, {}, {},
                   {"embeddings": {"dtype": "F16", "shape": [10, 8], "data_offsets": [0, 160]},
                    "mapping": {"dtype": "I64", "shape": [20], "data_offsets": [160, 320]}},
                   {"truncation": None}],
}
# Broken files, as bytes: an empty one, and a truncated one.
CFG_RAW = {
    "empty_modules": b'{"model_type":"bert"}\0',
    "truncated": json.dumps(BERT).encode()[:-20],
}


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    gw = os.path.join(HERE, "gw_seeds")
    cfg = os.path.join(HERE, "cfg_seeds")
    for d in (gw, cfg):
        os.makedirs(d, exist_ok=True)
    for name, (flags, body) in GW.items():
        write(os.path.join(gw, name), bytes([flags]) + json.dumps(body, ensure_ascii=False).encode())
    for name, (flags, body) in RAW.items():
        write(os.path.join(gw, name), bytes([flags]) + body)
    for name, files in CFG.items():
        parts = [b"" if f is None else json.dumps(f, indent=1).encode() for f in files]
        write(os.path.join(cfg, name), b"\0".join(parts))
    for name, data in CFG_RAW.items():
        write(os.path.join(cfg, name), data)


if __name__ == "__main__":
    main()
